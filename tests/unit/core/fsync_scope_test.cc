// Tests for src/core/fsync_scope.cc on real filesystems: image files formatted by the real mkfs
// tools, attached to loop devices and mounted (root; ROSETCTL_REQUIRE_ROOT_TESTS=1 makes
// skipping a failure).
#include "core/fsync_scope.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/loop_device.h"
#include "core/mount_filesystem.h"
#include "core/mount_ops.h"
#include "core/run_program.h"
#include "core/unique_fd.h"
#include "unit/root_tests.h"
#include "unit/scratch_dir.h"

using namespace std::chrono_literals;

using rosetctl::testing::have_root;
using rosetctl::testing::ScratchDir;

namespace {

// Formats a sparse image of `bytes` with `mkfs` (and its arguments), mounts it, and answers
// fsync_commits_earlier_metadata for a directory on it. Everything is undone on the way out.
bool answer_on(const std::vector<std::string>& mkfs, const std::string& package, off_t bytes,
               std::string_view fs_type) {
  ScratchDir scratch;
  std::string image = scratch.path + "/fs.img", mount_point = scratch.path + "/mnt";
  {
    rosetctl::UniqueFd file(::open(image.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    REQUIRE(file.valid());
    REQUIRE(::ftruncate(file.get(), bytes) == 0);
  }
  auto program = rosetctl::find_program(mkfs.front(), package);
  REQUIRE(program);
  std::vector<std::string> argv{*program};
  argv.insert(argv.end(), mkfs.begin() + 1, mkfs.end());
  argv.push_back(image);
  auto formatted = rosetctl::run_program(argv, 60s);
  REQUIRE(formatted);
  INFO(formatted->describe());
  REQUIRE(formatted->succeeded());
  std::filesystem::create_directory(mount_point);

  auto loop = rosetctl::LoopDevice::attach(image, {});
  REQUIRE(loop);
  rosetctl::Status mounted = rosetctl::mount_device(loop->path(), mount_point, fs_type, {});
  INFO(mounted.message());
  REQUIRE(mounted.is_ok());
  rosetctl::MountGuard unmount(mount_point);
  std::filesystem::create_directory(mount_point + "/objects");
  rosetctl::UniqueFd dir(::open((mount_point + "/objects").c_str(), O_RDONLY | O_DIRECTORY));
  REQUIRE(dir.valid());
  return rosetctl::fsync_commits_earlier_metadata(dir.get());
}

}  // namespace

TEST_CASE("ext4 with a journal commits earlier metadata with any fsync", "[fsync_scope][root]") {
  if (!have_root("to attach loop devices and mount")) return;
  CHECK(answer_on({"mkfs.ext4", "-q"}, "e2fsprogs", 64 << 20, "ext4"));
}

TEST_CASE("ext4 without a journal does not", "[fsync_scope][root]") {
  if (!have_root("to attach loop devices and mount")) return;
  CHECK_FALSE(answer_on({"mkfs.ext4", "-q", "-O", "^has_journal"}, "e2fsprogs", 64 << 20, "ext4"));
}

TEST_CASE("xfs commits earlier metadata with any fsync", "[fsync_scope][root]") {
  if (!have_root("to attach loop devices and mount")) return;
  CHECK(answer_on({"mkfs.xfs", "-q"}, "xfsprogs", 320 << 20, "xfs"));  // 300 MiB at least
}

TEST_CASE("a filesystem it does not know (tmpfs) does not", "[fsync_scope][root]") {
  if (!have_root("to attach loop devices and mount")) return;
  ScratchDir scratch;
  REQUIRE(rosetctl::mount_tmpfs(scratch.path, "size=1m", 0).is_ok());
  rosetctl::MountGuard unmount(scratch.path);
  rosetctl::UniqueFd dir(::open(scratch.path.c_str(), O_RDONLY | O_DIRECTORY));
  REQUIRE(dir.valid());
  CHECK_FALSE(rosetctl::fsync_commits_earlier_metadata(dir.get()));
}
