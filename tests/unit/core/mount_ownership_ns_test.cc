// Tests for src/core/mount_ownership.cc across mount namespaces: a node plugin restarted in a
// new namespace sees copies of its mounts with new ids, and must know them by their fingerprint
// while still refusing what was stacked on them or put in their place.
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "core/mount_ops.h"
#include "core/mount_ownership.h"
#include "unit/root_tests.h"
#include "unit/scratch_dir.h"

using rosetctl::MountOwner;
using rosetctl::MountTable;

namespace {

const rosetctl::MountFingerprint kOurs{7, 3, "ext4", "/volumes/v1"};

MountOwner judge_text(const std::string& text) {
  auto table = MountTable::parse(text);
  INFO(table.status().message());
  REQUIRE(table.has_value());
  return rosetctl::judge_by_fingerprint(*table, "/target", kOurs);
}

constexpr const char* kRoot = "20 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
constexpr const char* kOursLine =
    "30 20 7:3 /volumes/v1 /target rw shared:5 - ext4 /dev/loop3 rw\n";

}  // namespace

TEST_CASE("mount_ownership: by fingerprint, ours is the bottom of the stack at the path",
          "[mount_ownership]") {
  CHECK(judge_text(kRoot) == MountOwner::kNothing);
  CHECK(judge_text(std::string(kRoot) + kOursLine) == MountOwner::kOurs);
  // Anything stacked on ours is not ours, even a bind of the same directory.
  CHECK(judge_text(std::string(kRoot) + kOursLine + "31 30 0:50 / /target rw - tmpfs tmpfs rw\n") ==
        MountOwner::kCovered);
  CHECK(judge_text(std::string(kRoot) + kOursLine +
                   "31 30 7:3 /volumes/v1 /target rw - ext4 /dev/loop3 rw\n") ==
        MountOwner::kCovered);
  // Another filesystem, or another directory of ours, in its place.
  CHECK(judge_text(std::string(kRoot) + "31 20 0:50 / /target rw - tmpfs tmpfs rw\n") ==
        MountOwner::kForeign);
  CHECK(judge_text(std::string(kRoot) + "31 20 7:3 / /target rw - ext4 /dev/loop3 rw\n") ==
        MountOwner::kForeign);
  // A mount of the parent directory says nothing about the target.
  CHECK(judge_text(std::string(kRoot) + "31 20 7:3 /volumes/v1 /other rw - ext4 /dev/loop3 rw\n") ==
        MountOwner::kNothing);
}

TEST_CASE("mount_ownership: a FUSE mount's fingerprint leaves out the subtype",
          "[mount_ownership]") {
  auto table =
      MountTable::parse(std::string(kRoot) + "30 20 0:60 / /target rw - fuse.bindfs src rw\n");
  REQUIRE(table.has_value());
  const rosetctl::MountEntry* top = table->find_by_target("/target");
  REQUIRE(top != nullptr);
  auto fingerprint = rosetctl::fingerprint_of(*top);
  CHECK(fingerprint.fs_type == "fuse");
  CHECK(rosetctl::judge_by_fingerprint(*table, "/target", fingerprint) == MountOwner::kOurs);
}

namespace {

// Judges in a new mount namespace (a copy of this one, as a restarted container's is): the
// child's exit status is the step that went wrong, 0 when none did.
int judge_in_new_namespace(const std::string& target, const rosetctl::RecordedMount& recorded) {
  if (::unshare(CLONE_NEWNS) != 0) return 10;
  // Private: what the child mounts must not reach the test's namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 11;
  if (rosetctl::current_mount_namespace() == recorded.mount_ns) return 12;
  auto judged = rosetctl::judge_mount(target, recorded);
  if (!judged || judged->owner != MountOwner::kOurs) return 13;
  if (!judged->adopted || judged->adopted->id == recorded.id ||
      judged->adopted->fingerprint != recorded.fingerprint)
    return 14;
  if (::mount("stacked", target.c_str(), "tmpfs", 0, "size=1m") != 0) return 15;
  judged = rosetctl::judge_mount(target, recorded);
  if (!judged || judged->owner != MountOwner::kCovered || judged->adopted) return 16;
  if (::umount2(target.c_str(), 0) != 0 || ::umount2(target.c_str(), 0) != 0) return 17;
  if (::mount("instead", target.c_str(), "tmpfs", 0, "size=1m") != 0) return 18;
  judged = rosetctl::judge_mount(target, recorded);
  if (!judged || judged->owner != MountOwner::kForeign) return 19;
  return 0;
}

}  // namespace

TEST_CASE("mount_ownership: ours is known in another mount namespace, and only ours",
          "[mount_ownership][root]") {
  if (!rosetctl::testing::have_root("for mount(2) and unshare(2)")) return;
  rosetctl::testing::ScratchDir dir("ownership-ns");
  std::string source = dir / "source", target = dir / "target";
  REQUIRE(::mkdir(source.c_str(), 0755) == 0);
  REQUIRE(::mkdir(target.c_str(), 0755) == 0);
  REQUIRE(::mount("rosetctl-test", source.c_str(), "tmpfs", 0, "size=1m") == 0);
  REQUIRE(rosetctl::bind_mount(source, target, rosetctl::MountOptions{}).is_ok());
  rosetctl::RecordedMount recorded = rosetctl::record_mount_at(target);
  CHECK(recorded.id != 0);
  CHECK(recorded.mount_ns == rosetctl::current_mount_namespace());
  CHECK(recorded.fingerprint.fs_type == "tmpfs");

  std::fflush(nullptr);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(judge_in_new_namespace(target, recorded));
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  // Here, where it was made, only its id counts: a bind of the same directory in its place
  // has the same fingerprint and is still not ours.
  CHECK(rosetctl::judge_mount(target, recorded)->owner == MountOwner::kOurs);
  REQUIRE(::umount2(target.c_str(), 0) == 0);
  REQUIRE(rosetctl::bind_mount(source, target, rosetctl::MountOptions{}).is_ok());
  CHECK(rosetctl::judge_mount(target, recorded)->owner == MountOwner::kForeign);

  ::umount2(target.c_str(), MNT_DETACH);
  ::umount2(source.c_str(), MNT_DETACH);
}
