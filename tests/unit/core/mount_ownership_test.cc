// Tests for src/core/mount_ownership.cc: judging the mount at a path against the recorded one,
// with real mounts (root).
#include "core/mount_ownership.h"

#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>

#include "core/mount_ops.h"
#include "core/mount_point.h"
#include "unit/root_tests.h"
#include "unit/scratch_dir.h"

using rosetctl::MountOwner;
using rosetctl::testing::have_root;

namespace {

// A scratch directory whose mounts are all taken away at the end, stacked ones included.
class Scratch {
 public:
  ~Scratch() {
    for (const std::string& point : points_) {
      for (int i = 0; i < 8 && ::umount2(point.c_str(), MNT_DETACH) == 0; ++i) {
      }
    }
  }
  std::string dir(const std::string& name) {
    std::string path = scratch_ / name;
    REQUIRE(::mkdir(path.c_str(), 0755) == 0);
    points_.push_back(path);
    return path;
  }
  void tmpfs(const std::string& at) {
    REQUIRE(::mount("rosetctl-test", at.c_str(), "tmpfs", 0, "size=1m") == 0);
  }

 private:
  rosetctl::testing::ScratchDir scratch_{"ownership-test"};  // removed after the unmounts
  std::vector<std::string> points_;
};

MountOwner owner_at(const std::string& path, rosetctl::MountId recorded) {
  auto judged = rosetctl::judge_mount(path, rosetctl::RecordedMount{recorded});
  INFO(judged.status().message());
  REQUIRE(judged.has_value());
  return judged->owner;
}

}  // namespace

TEST_CASE("mount_ownership: the recorded mount, one on top of it, one in its place",
          "[mount_ownership][root]") {
  if (!have_root("for mount(2)")) return;
  Scratch scratch;
  std::string source = scratch.dir("source");
  std::string target = scratch.dir("target");
  scratch.tmpfs(source);
  CHECK(owner_at(target, 0) == MountOwner::kNothing);

  REQUIRE(rosetctl::bind_mount(source, target, rosetctl::MountOptions{}).is_ok());
  rosetctl::MountId ours = rosetctl::mount_made_at(target);
  REQUIRE(ours != 0);  // Linux 6.8+: these machines have unique mount ids
  CHECK(owner_at(target, ours) == MountOwner::kOurs);

  SECTION("a mount stacked on top") {
    scratch.tmpfs(target);
    auto judged = rosetctl::judge_mount(target, rosetctl::RecordedMount{ours});
    REQUIRE(judged.has_value());
    CHECK(judged->owner == MountOwner::kCovered);
    CHECK_THAT(judged->describe_top(), Catch::Contains("tmpfs"));
  }
  SECTION("ours unmounted by hand and another mount in its place") {
    REQUIRE(::umount2(target.c_str(), 0) == 0);
    CHECK(owner_at(target, ours) == MountOwner::kNothing);
    scratch.tmpfs(target);
    CHECK(owner_at(target, ours) == MountOwner::kForeign);
    // A record from before ids were kept accepts whatever is there, as rosetctl did then.
    CHECK(owner_at(target, 0) == MountOwner::kOurs);
  }
}
