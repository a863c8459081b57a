// Tests for src/core/mount_ops.cc. The mount tests make real mounts under a scratch directory in
// /tmp and need root; set ROSETCTL_REQUIRE_ROOT_TESTS=1 to make skipping them a failure.
#include "core/mount_ops.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "core/mount_filesystem.h"
#include "core/mount_lookup.h"
#include "core/mountinfo.h"
#include "core/real_path.h"
#include "unit/root_tests.h"
#include "unit/scratch_dir.h"

using rosetctl::Code;
using rosetctl::MountEntry;
using rosetctl::MountGuard;
using rosetctl::MountOptions;
using rosetctl::MountTable;
using rosetctl::PathHealth;

using rosetctl::testing::have_root;

namespace {

// A directory under /tmp that, whatever a test did, leaves no mount and no file behind.
class ScratchDir {
 public:
  ScratchDir() : scratch_("mount-test"), path_(scratch_.path) {}
  ~ScratchDir() {
    for (int round = 0; round < 8; ++round) {  // stacked mounts may need several rounds
      auto table = MountTable::read();
      if (!table) break;
      auto mounts = table->under(path_);
      if (mounts.empty()) return;  // scratch_ removes the directory
      for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
        ::umount2((*it)->mount_point.c_str(), MNT_DETACH);
      }
    }
    scratch_.keep();  // still mounted, or mounts not known
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string make_dir(const std::string& name) const {
    std::string dir = path_ + "/" + name;
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
    return dir;
  }
  // A fresh tmpfs, standing in for a staged volume.
  std::string make_staging(const std::string& name) const {
    std::string dir = make_dir(name);
    REQUIRE(::mount("rosetctl-test", dir.c_str(), "tmpfs", 0, "size=1m") == 0);
    return dir;
  }
  const std::string& path() const { return path_; }

 private:
  rosetctl::testing::ScratchDir scratch_;
  std::string path_;
};

// 0 or the errno of creating and writing `path`.
int write_file(const std::string& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  ssize_t written = ::write(fd, content.data(), content.size());
  int err = written == static_cast<ssize_t>(content.size()) ? 0 : errno;
  ::close(fd);
  return err;
}

std::string read_file(const std::string& path) {
  std::string content;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "<" + std::string(std::strerror(errno)) + ">";
  char buffer[256];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0)
    content.append(buffer, n);
  ::close(fd);
  return content;
}

MountTable read_table() {
  auto table = MountTable::read();
  INFO(table.status().message());
  REQUIRE(table.has_value());
  return std::move(table).value();
}

bool has_option(const MountEntry& entry, std::string_view option) {
  std::string_view options = entry.mount_options;
  size_t start = 0;
  while (start <= options.size()) {
    size_t comma = std::min(options.find(',', start), options.size());
    if (options.substr(start, comma - start) == option) return true;
    start = comma + 1;
  }
  return false;
}

void require_ok(const rosetctl::Status& status) {
  INFO(status.message());
  REQUIRE(status.is_ok());
}

// A bind made behind rosetctl's back (bind_mount refuses a target that is a mount point), to
// stack mounts or to stand for a mount somebody else made.
void raw_bind(const std::string& source, const std::string& target) {
  REQUIRE(::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) == 0);
}

}  // namespace

TEST_CASE("mount_ops: parse_mount_flags", "[mount_ops]") {
  auto parsed = rosetctl::parse_mount_flags({"ro", "noexec,nosuid", "nodev", "noatime", "bind"});
  REQUIRE(parsed.has_value());
  CHECK(parsed->read_only);
  CHECK(parsed->flags == (MS_NOEXEC | MS_NOSUID | MS_NODEV | MS_NOATIME));

  SECTION("later flags undo earlier ones, left to right") {
    auto undone = rosetctl::parse_mount_flags({"ro", "noexec", "relatime", "rw", "exec"});
    REQUIRE(undone.has_value());
    CHECK_FALSE(undone->read_only);
    CHECK(undone->flags == MS_RELATIME);  // relatime replaced no atime mode, exec cleared noexec
    auto defaults = rosetctl::parse_mount_flags({"ro,nosuid,sync,nodiratime", "defaults"});
    REQUIRE(defaults.has_value());
    CHECK_FALSE(defaults->read_only);
    CHECK(defaults->flags == MS_NODIRATIME);
  }
  SECTION("no flags is a plain read-write bind") {
    auto none = rosetctl::parse_mount_flags({});
    REQUIRE(none.has_value());
    CHECK_FALSE(none->read_only);
    CHECK(none->flags == 0);
  }
  SECTION("unknown flags are rejected, naming the flag and what is supported") {
    auto bogus = rosetctl::parse_mount_flags({"nosuid", "bogus"});
    REQUIRE_FALSE(bogus.has_value());
    CHECK(bogus.status().code() == Code::kInvalidArgument);
    CHECK_THAT(bogus.status().message(), Catch::Contains("\"bogus\""));
    CHECK_THAT(bogus.status().message(), Catch::Contains("noexec"));
    CHECK_FALSE(rosetctl::parse_mount_flags({""}).has_value());
    CHECK_FALSE(rosetctl::parse_mount_flags({"size=1m"}).has_value());
  }
}

TEST_CASE("mount_ops: probe_path", "[mount_ops]") {
  int err = -1;
  CHECK(rosetctl::probe_path("/nonexistent/rosetctl/path", &err) == PathHealth::kMissing);
  CHECK(err == ENOENT);
  CHECK(rosetctl::probe_path("/", &err) == PathHealth::kOk);
  CHECK(err == 0);
  CHECK(rosetctl::probe_path("/proc/self/mountinfo/x", &err) == PathHealth::kOther);
  CHECK(err == ENOTDIR);
  CHECK(rosetctl::probe_path("/nonexistent") == PathHealth::kMissing);
}

TEST_CASE("mount_ops: bind mount shows the staging directory at the target", "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string staging = scratch.make_staging("staging");
  std::string other = scratch.make_staging("other");
  std::string target = scratch.make_dir("target");
  REQUIRE(write_file(staging + "/hello", "world") == 0);

  require_ok(rosetctl::bind_mount(staging, target, MountOptions{}));
  CHECK(read_file(target + "/hello") == "world");
  REQUIRE(write_file(target + "/back", "through the bind") == 0);
  CHECK(read_file(staging + "/back") == "through the bind");

  MountTable table = read_table();
  const MountEntry* staged = table.find_by_target(staging);
  const MountEntry* published = table.find_by_target(target);
  REQUIRE(staged != nullptr);
  REQUIRE(published != nullptr);
  CHECK(same_source(*staged, *published));
  CHECK_FALSE(published->read_only());
  CHECK_FALSE(same_source(*table.find_by_target(other), *published));
}

TEST_CASE("mount_ops: read-only bind rejects writes with EROFS", "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string staging = scratch.make_staging("staging");
  std::string target = scratch.make_dir("target");

  require_ok(rosetctl::bind_mount(staging, target, MountOptions{.read_only = true}));
  CHECK(write_file(target + "/denied", "x") == EROFS);
  CHECK(write_file(staging + "/allowed", "x") == 0);  // the staging mount stays writable
  CHECK(read_file(target + "/allowed") == "x");

  MountTable table = read_table();
  REQUIRE(table.find_by_target(target) != nullptr);
  CHECK(table.find_by_target(target)->read_only());
  CHECK_FALSE(table.find_by_target(staging)->read_only());
}

TEST_CASE("mount_ops: per-mount flags show in mount_options", "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string staging = scratch.make_staging("staging");
  std::string target = scratch.make_dir("target");
  auto options = rosetctl::parse_mount_flags({"noexec", "nosuid,nodev"});
  REQUIRE(options.has_value());

  require_ok(rosetctl::bind_mount(staging, target, *options));
  MountTable table = read_table();
  const MountEntry* published = table.find_by_target(target);
  REQUIRE(published != nullptr);
  INFO(published->mount_options);
  CHECK(has_option(*published, "noexec"));
  CHECK(has_option(*published, "nosuid"));
  CHECK(has_option(*published, "nodev"));
  CHECK(has_option(*published, "rw"));
  CHECK_FALSE(has_option(*table.find_by_target(staging), "noexec"));
}

TEST_CASE("mount_ops: bind mount of a missing source says what failed", "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string target = scratch.make_dir("target");
  std::string missing = scratch.path() + "/missing";

  rosetctl::Status status = rosetctl::bind_mount(missing, target, MountOptions{.read_only = true});
  CHECK(status.code() == Code::kNotFound);
  CHECK_THAT(status.message(), Catch::StartsWith("bind mount of \"" + missing + "\": ") &&
                                   Catch::Contains("does not exist"));
  CHECK(read_table().count_at(target) == 0);
}

TEST_CASE("mount_ops: unmount errors tell not-mounted from missing and busy", "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string plain = scratch.make_dir("plain");

  rosetctl::Status not_mounted = rosetctl::unmount(plain);
  CHECK(not_mounted.code() == Code::kFailedPrecondition);
  CHECK(not_mounted.message() == "unmount of \"" + plain + "\" failed: not a mount point");

  rosetctl::Status missing = rosetctl::unmount(scratch.path() + "/missing");
  CHECK(missing.code() == Code::kNotFound);

  std::string staging = scratch.make_staging("busy");
  int fd = ::open((staging + "/held").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  rosetctl::Status busy = rosetctl::unmount(staging);
  ::close(fd);
  CHECK(busy.code() == Code::kUnavailable);
  CHECK_THAT(busy.message(), Catch::Contains(staging));
  require_ok(rosetctl::unmount(staging));
  CHECK(read_table().count_at(staging) == 0);
}

TEST_CASE("mount_ops: unmount_all removes stacked duplicates", "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string staging = scratch.make_staging("staging");
  std::string target = scratch.make_dir("target");
  require_ok(rosetctl::bind_mount(staging, target, MountOptions{}));
  raw_bind(staging, target);
  REQUIRE(read_table().count_at(target) == 2);

  require_ok(rosetctl::unmount_all(target + "/"));
  CHECK(read_table().count_at(target) == 0);
  require_ok(rosetctl::unmount_all(target));   // nothing left: still fine
  CHECK(read_table().count_at(staging) == 1);  // a sibling mount is left alone
}

TEST_CASE("mount_ops: MountGuard unmounts unless released", "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string staging = scratch.make_staging("staging");
  std::string target = scratch.make_dir("target");

  SECTION("scope exit unmounts") {
    {
      require_ok(rosetctl::bind_mount(staging, target, MountOptions{}));
      MountGuard guard(target);
      CHECK(guard.active());
      CHECK(read_table().count_at(target) == 1);
    }
    CHECK(read_table().count_at(target) == 0);
  }
  SECTION("release keeps the mount") {
    {
      require_ok(rosetctl::bind_mount(staging, target, MountOptions{}));
      MountGuard guard(target);
      guard.release();
      CHECK_FALSE(guard.active());
    }
    CHECK(read_table().count_at(target) == 1);
  }
  SECTION("a move hands over the duty to unmount, once") {
    require_ok(rosetctl::bind_mount(staging, target, MountOptions{}));
    raw_bind(staging, target);
    {
      MountGuard outer;
      {
        MountGuard inner(target);
        outer = std::move(inner);
      }
      CHECK(read_table().count_at(target) == 2);
      CHECK(outer.target() == target);
    }
    CHECK(read_table().count_at(target) == 1);
  }
}

TEST_CASE("mount_ops: MountGuard leaves a mount stacked on top of its own alone",
          "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string staging = scratch.make_staging("staging");
  std::string other = scratch.make_staging("other");
  std::string target = scratch.make_dir("target");
  {
    require_ok(rosetctl::bind_mount(staging, target, MountOptions{}));
    MountGuard guard(target);
    raw_bind(other, target);  // somebody else's, on top
  }
  REQUIRE(read_table().count_at(target) == 2);
}

TEST_CASE("mount_ops: a bind goes only on an empty directory that is not a mount point",
          "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string staging = scratch.make_staging("staging");

  SECTION("a directory with contents would be hidden") {
    std::string target = scratch.make_dir("full");
    REQUIRE(write_file(target + "/keep", "data") == 0);
    rosetctl::Status status = rosetctl::bind_mount(staging, target, MountOptions{});
    CHECK(status.code() == Code::kFailedPrecondition);
    CHECK_THAT(status.message(), Catch::Contains("not empty"));
    CHECK(read_table().count_at(target) == 0);
  }
  SECTION("a mount point already has a mount") {
    std::string target = scratch.make_staging("mounted");
    rosetctl::Status status = rosetctl::bind_mount(staging, target, MountOptions{});
    CHECK(status.code() == Code::kAlreadyExists);
    CHECK(read_table().count_at(target) == 1);
  }
  SECTION("a symlink anywhere on the target's path is not followed") {
    std::string real = scratch.make_dir("real");
    std::string empty = scratch.make_dir("real/empty");
    REQUIRE(::symlink(real.c_str(), (scratch.path() + "/link").c_str()) == 0);
    rosetctl::Status through_parent =
        rosetctl::bind_mount(staging, scratch.path() + "/link/empty", MountOptions{});
    CHECK(through_parent.code() == Code::kInvalidArgument);
    CHECK_THAT(through_parent.message(), Catch::Contains("symbolic link"));
    REQUIRE(::symlink(empty.c_str(), (scratch.path() + "/leaf").c_str()) == 0);
    rosetctl::Status at_leaf =
        rosetctl::bind_mount(staging, scratch.path() + "/leaf", MountOptions{});
    CHECK(at_leaf.code() == Code::kInvalidArgument);
    CHECK(read_table().count_at(empty) == 0);
  }
  SECTION("a device node binds onto an empty file only") {
    std::string file = scratch.path() + "/target-file";
    REQUIRE(write_file(file, "") == 0);
    std::string node = staging + "/null";
    REQUIRE(::mknod(node.c_str(), S_IFCHR | 0600, ::makedev(1, 3)) == 0);
    require_ok(rosetctl::bind_mount(node, file, MountOptions{}));
    CHECK(read_table().count_at(file) == 1);
    std::string with_data = scratch.path() + "/data-file";
    REQUIRE(write_file(with_data, "x") == 0);
    CHECK(rosetctl::bind_mount(node, with_data, MountOptions{}).code() ==
          Code::kFailedPrecondition);
  }
}

TEST_CASE("mount_ops: unmount never follows a symlink on the path", "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string real = scratch.make_dir("real");
  std::string mounted = scratch.make_staging("real/m");
  REQUIRE(::symlink(real.c_str(), (scratch.path() + "/link").c_str()) == 0);

  rosetctl::Status status = rosetctl::unmount(scratch.path() + "/link/m");
  CHECK(status.code() == Code::kInvalidArgument);
  CHECK(read_table().count_at(mounted) == 1);
  require_ok(rosetctl::unmount(mounted));
  CHECK(read_table().count_at(mounted) == 0);
}

TEST_CASE("mount_ops: tmpfs and device mounts take their options and say what the kernel said",
          "[mount_ops][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string target = scratch.make_dir("tmp");
  require_ok(rosetctl::mount_tmpfs(target, "size=16k,nr_inodes=8,mode=0700", MS_NOSUID));
  MountTable table = read_table();
  const MountEntry* mounted = table.find_by_target(target);
  REQUIRE(mounted != nullptr);
  CHECK(mounted->fs_type == "tmpfs");
  CHECK(has_option(*mounted, "nosuid"));
  struct stat st;
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  require_ok(rosetctl::unmount(target));

  rosetctl::Status bad = rosetctl::mount_tmpfs(target, "size=16k,no-such-option", 0);
  CHECK_FALSE(bad.is_ok());
  CHECK_THAT(bad.message(), Catch::Contains("no-such-option"));
  CHECK(read_table().count_at(target) == 0);

  rosetctl::Status no_device =
      rosetctl::mount_device(scratch.path() + "/missing-device", target, "ext4", MountOptions{});
  CHECK_FALSE(no_device.is_ok());
  CHECK(read_table().count_at(target) == 0);
}

namespace {

// find_mount must give what the table gives, field by field.
void check_matches_table(const std::string& path) {
  auto found = rosetctl::find_mount(path);
  INFO(path << ": " << found.status().message());
  REQUIRE(found.has_value());
  MountTable table = read_table();
  const MountEntry* listed = table.find_by_target(path);
  REQUIRE(found->has_value() == (listed != nullptr));
  if (listed == nullptr) return;
  const MountEntry& entry = **found;
  CHECK(entry.mount_id == listed->mount_id);
  CHECK(entry.parent_id == listed->parent_id);
  CHECK(entry.major == listed->major);
  CHECK(entry.minor == listed->minor);
  CHECK(entry.root == listed->root);
  CHECK(entry.mount_point == listed->mount_point);
  CHECK(entry.fs_type == listed->fs_type);
  CHECK(entry.mount_options == listed->mount_options);
  CHECK(entry.source.empty());  // documented as never filled, whichever way it was found
  CHECK(entry.super_options.empty());
}

}  // namespace

TEST_CASE("mount_lookup: find_mount answers as the mount table does", "[mount_lookup][root]") {
  if (!have_root("for mount(2)")) return;
  ScratchDir scratch;
  std::string staging = scratch.make_staging("staging");
  REQUIRE(::mkdir((staging + "/sub dir").c_str(), 0755) == 0);
  std::string plain = scratch.make_dir("plain");
  std::string flagged = scratch.make_dir("with flags");
  std::string subtree = scratch.make_dir("subtree");
  std::string stacked = scratch.make_dir("stacked");
  require_ok(rosetctl::bind_mount(staging, plain, MountOptions{}));
  auto flags = rosetctl::parse_mount_flags({"ro", "noexec", "nosuid", "nodev", "noatime"});
  REQUIRE(flags.has_value());
  require_ok(rosetctl::bind_mount(staging, flagged, *flags));
  require_ok(rosetctl::bind_mount(staging + "/sub dir", subtree, MountOptions{}));
  require_ok(rosetctl::bind_mount(staging, stacked, MountOptions{}));
  REQUIRE(::mount((staging + "/sub dir").c_str(), stacked.c_str(), nullptr, MS_BIND, nullptr) == 0);

  for (const std::string& path : {staging, plain, flagged, subtree, stacked})
    check_matches_table(path);
  CHECK((*rosetctl::find_mount(flagged))->read_only());
  CHECK((*rosetctl::find_mount(stacked))->root.ends_with("/sub dir"));  // the topmost one

  // Not mount points: a plain directory, one inside a mount, a missing path, a trailing slash.
  std::string unmounted = scratch.make_dir("unmounted");
  for (const std::string& path : {unmounted, plain + "/sub dir", scratch.path() + "/missing",
                                  scratch.path() + "/missing/deeper", plain + "/"}) {
    check_matches_table(path);
  }
  CHECK_FALSE(rosetctl::find_mount(unmounted)->has_value());

  require_ok(rosetctl::unmount(plain));
  CHECK_FALSE(rosetctl::find_mount(plain)->has_value());
  require_ok(rosetctl::unmount(stacked));
  check_matches_table(stacked);  // the lower mount shows again
  CHECK((*rosetctl::find_mount(stacked))->root == "/");
}

TEST_CASE("real_path: a directory's canonical path, as realpath(3) gives it", "[real_path]") {
  rosetctl::testing::ScratchDir scratch_dir("real-path");
  const std::string& scratch = scratch_dir.path;
  REQUIRE(::mkdir((scratch + "/a").c_str(), 0755) == 0);
  REQUIRE(::mkdir((scratch + "/a/with space").c_str(), 0755) == 0);
  REQUIRE(::symlink("a/with space", (scratch + "/link").c_str()) == 0);
  REQUIRE(write_file(scratch + "/file", "x") == 0);

  for (const std::string& path : {scratch, scratch + "/a/with space", scratch + "/link",
                                  scratch + "/a/../link/", scratch + "/./a", std::string("/"),
                                  scratch + "//a", scratch + "/a/", scratch + "/link/.."}) {
    char expected[PATH_MAX];
    REQUIRE(::realpath(path.c_str(), expected) != nullptr);
    auto resolved = rosetctl::real_directory_path(path);
    INFO(path);
    REQUIRE(resolved.has_value());
    CHECK(*resolved == expected);
  }
  errno = 0;
  CHECK_FALSE(rosetctl::real_directory_path(scratch + "/missing").has_value());
  CHECK(errno == ENOENT);
  CHECK_FALSE(rosetctl::real_directory_path(scratch + "/file").has_value());
  CHECK(errno == ENOTDIR);
  // Through a symlink the answer is the same as along the real path: the link's target missing.
  REQUIRE(::symlink("missing", (scratch + "/dangling").c_str()) == 0);
  errno = 0;
  CHECK_FALSE(rosetctl::real_directory_path(scratch + "/dangling").has_value());
  CHECK(errno == ENOENT);
  CHECK_FALSE(rosetctl::real_directory_path(scratch + "/link/missing").has_value());
  CHECK(errno == ENOENT);
}
