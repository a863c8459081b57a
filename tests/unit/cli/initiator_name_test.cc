// Tests for src/cli/initiator_name.cc: the iSCSI initiator name `node register` finds in
// open-iscsi's file.
#include "cli/initiator_name.h"

#include <catch2/catch.hpp>

#include "unit/scratch_dir.h"

using rosetctl::cli::read_initiator_name;
using rosetctl::testing::ScratchDir;
using rosetctl::testing::write_file;

TEST_CASE("the initiator name is the InitiatorName= line of open-iscsi's file", "[registry]") {
  ScratchDir dir;
  std::string path = dir / "initiatorname.iscsi";
  write_file(
      path,
      "## DO NOT EDIT OR REMOVE THIS FILE!\n## InitiatorName=iqn.commented\n"
      "\n  InitiatorName=iqn.1993-08.org.debian:01:5e1f2a3b4c \r\nInitiatorName=iqn.second\n");
  auto name = read_initiator_name(path);
  REQUIRE(name);
  CHECK(*name == std::optional<std::string>("iqn.1993-08.org.debian:01:5e1f2a3b4c"));
}

TEST_CASE("no initiator file, or one naming none, is no initiator name", "[registry]") {
  ScratchDir dir;
  auto missing = read_initiator_name(dir / "absent");
  REQUIRE(missing);
  CHECK_FALSE(missing->has_value());
  std::string path = dir / "initiatorname.iscsi";
  write_file(path, "# nothing here\n");
  auto none = read_initiator_name(path);
  REQUIRE(none);
  CHECK_FALSE(none->has_value());
}

TEST_CASE("an initiator file that cannot be read is an error naming it", "[registry]") {
  ScratchDir dir;
  // A directory: open(O_RDONLY) works, read() fails with EISDIR.
  auto name = read_initiator_name(dir.path);
  REQUIRE_FALSE(name);
  CHECK_THAT(name.status().message(), Catch::Contains(dir.path));
}
