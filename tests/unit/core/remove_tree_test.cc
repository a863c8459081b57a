// Tests for src/core/remove_tree.cc: recursive removal that stays on one mount.
#include "core/remove_tree.h"

#include <sys/mount.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "unit/scratch_dir.h"

namespace fs = std::filesystem;

namespace {

using rosetctl::testing::write_file;

// The tmpfs a test mounts at victim/mounted goes before the directory is removed.
struct TempDir : rosetctl::testing::ScratchDir {
  TempDir() : ScratchDir("rm") {}
  ~TempDir() { ::umount2((path + "/victim/mounted").c_str(), MNT_DETACH); }
};

bool need_root() {
  if (::geteuid() == 0) return true;
  if (const char* required = std::getenv("ROSETCTL_REQUIRE_ROOT_TESTS");
      required && *required == '1') {
    FAIL("this test needs root for mount(2) and ROSETCTL_REQUIRE_ROOT_TESTS=1");
  }
  WARN("skipped: needs root for mount(2)");
  return false;
}

}  // namespace

TEST_CASE("remove_tree removes nested files, dirs and symlinks without following them",
          "[remove_tree]") {
  TempDir dir;
  fs::create_directories(dir.path + "/victim/a/b");
  fs::create_directories(dir.path + "/keep");
  write_file(dir.path + "/victim/a/b/file", "x");
  write_file(dir.path + "/keep/precious", "keep me");
  fs::create_directory_symlink(dir.path + "/keep", dir.path + "/victim/link");
  REQUIRE(rosetctl::remove_tree(dir.path + "/victim").is_ok());
  CHECK_FALSE(fs::exists(dir.path + "/victim"));
  CHECK(fs::exists(dir.path + "/keep/precious"));
}

TEST_CASE("remove_tree of a missing path is fine", "[remove_tree]") {
  TempDir dir;
  CHECK(rosetctl::remove_tree(dir.path + "/nothing").is_ok());
}

TEST_CASE("remove_tree stops at a bind mount of the same filesystem", "[remove_tree][root]") {
  if (!need_root()) return;
  TempDir dir;
  fs::create_directories(dir.path + "/victim/mounted");
  fs::create_directories(dir.path + "/keep");
  write_file(dir.path + "/keep/precious", "keep me");
  REQUIRE(::mount((dir.path + "/keep").c_str(), (dir.path + "/victim/mounted").c_str(), nullptr,
                  MS_BIND, nullptr) == 0);
  auto status = rosetctl::remove_tree(dir.path + "/victim");
  CHECK(status.code() == rosetctl::Code::kFailedPrecondition);
  CHECK(status.message().find("mount point") != std::string::npos);
  CHECK(fs::exists(dir.path + "/keep/precious"));
}
