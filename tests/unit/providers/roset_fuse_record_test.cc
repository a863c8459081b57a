// Tests for src/providers/roset/fuse_record.cc: a shared roset-fuse's files go entirely when its
// last user goes, also after a kill -9 in the middle of saving one of them.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "providers/roset/fuse_record.h"
#include "unit/scratch_dir.h"

using rosetctl::testing::ScratchDir;
using rosetctl::testing::write_file;

TEST_CASE("removing a fuse's files removes temporaries a killed save left",
          "[roset][fuse_record]") {
  ScratchDir scratch;
  rosetctl::FuseFiles files{scratch.path + "/key"};
  REQUIRE(::mkdir(files.dir.c_str(), 0700) == 0);
  REQUIRE(::mkdir(files.mountpoint().c_str(), 0755) == 0);
  REQUIRE(rosetctl::write_credentials(files, "rsk_test_key"));
  rosetctl::FuseRecord record;
  REQUIRE(rosetctl::save_fuse_record(files, record));
  // What a kill between writing the temporary and renaming it leaves, for both files.
  write_file(files.record() + ".0123abcd.tmp", "{}");
  write_file(files.credentials() + ".89abcdef.tmp", "rsk_test_key\n");

  REQUIRE(rosetctl::remove_fuse_files(files));
  CHECK_FALSE(std::filesystem::exists(files.dir));
}

TEST_CASE("removing a fuse's files leaves anything that is not its own", "[roset][fuse_record]") {
  ScratchDir scratch;
  rosetctl::FuseFiles files{scratch.path + "/key"};
  REQUIRE(::mkdir(files.dir.c_str(), 0700) == 0);
  write_file(files.dir + "/someone-elses.tmp", "keep");
  write_file(files.record() + ".not-hex-at-all.tmp", "keep");
  CHECK_FALSE(rosetctl::remove_fuse_files(files));
  CHECK(std::filesystem::exists(files.dir + "/someone-elses.tmp"));
  CHECK(std::filesystem::exists(files.record() + ".not-hex-at-all.tmp"));
}
