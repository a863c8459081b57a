// A new login's settings written into an open-iscsi node record file
// (providers/iscsi/node_record.cc); the guest tests log in with records written so.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "providers/iscsi/node_record.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using rosetctl::testing::read_file;
using rosetctl::testing::ScratchDir;
using rosetctl::testing::write_file;

namespace {

// As `iscsiadm --op new` writes one (shortened).
const std::string kRecord =
    "# BEGIN RECORD 2.1.8\n"
    "node.name = iqn.2026-11.io.roset:iscsi-a\n"
    "node.tpgt = -1\n"
    "node.startup = automatic\n"
    "node.session.initial_login_retry_max = 8\n"
    "node.session.auth.authmethod = None\n"
    "node.conn[0].address = 10.0.2.2\n"
    "# END RECORD\n";

}  // namespace

TEST_CASE("a record's settings are replaced in place and the missing ones added before its end",
          "[iscsi]") {
  ScratchDir dir;
  std::string record = dir / "10.0.2.2,3260,1";
  write_file(record, kRecord + "node.startup = onboot\n");
  REQUIRE(iscsi::write_record_settings(record, {{"node.startup", "manual"},
                                                {"node.session.initial_login_retry_max", "2"},
                                                {"node.session.auth.authmethod", "CHAP"},
                                                {"node.session.auth.username", "u:guest"},
                                                {"node.session.auth.password", "p a=ss"}}));
  CHECK(read_file(record) ==
        "# BEGIN RECORD 2.1.8\n"
        "node.name = iqn.2026-11.io.roset:iscsi-a\n"
        "node.tpgt = -1\n"
        "node.startup = manual\n"
        "node.session.initial_login_retry_max = 2\n"
        "node.session.auth.authmethod = CHAP\n"
        "node.conn[0].address = 10.0.2.2\n"
        "node.session.auth.username = u:guest\n"
        "node.session.auth.password = p a=ss\n"
        "# END RECORD\n");
  struct stat info {};
  REQUIRE(::stat(record.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);  // it holds a password
}

TEST_CASE("a value that would not read back as itself is refused without showing it", "[iscsi]") {
  ScratchDir dir;
  std::string record = dir / "10.0.2.2,3260,1";
  write_file(record, kRecord);
  // iscsiadm's reader ends a setting at a line feed: a password with one would set the startup.
  for (const std::string& bad :
       std::vector<std::string>{"s3cret\nnode.startup = automatic", "s3cret\r", " s3cret",
                                "s3cret ", std::string(256, 'x')}) {
    Status refused = iscsi::write_record_settings(record, {{"node.session.auth.password", bad}});
    REQUIRE(!refused);
    CHECK(refused.code() == Code::kInvalidArgument);
    CHECK(refused.message().find("node.session.auth.password") != std::string::npos);
    CHECK(refused.message().find("s3cret") == std::string::npos);
  }
  CHECK(read_file(record) == kRecord);
  CHECK(iscsi::check_record_value("node.session.auth.password", std::string(255, 'x')));
}

TEST_CASE("a record that is not there is an error, not a new file", "[iscsi]") {
  ScratchDir dir;
  std::string record = dir / "missing";
  Status failed = iscsi::write_record_settings(record, {{"node.startup", "manual"}});
  REQUIRE(!failed);
  CHECK(!std::filesystem::exists(record));
}
