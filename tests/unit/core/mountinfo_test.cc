// Tests for src/core/mountinfo.cc: parsing mountinfo text and the MountTable queries.
#include "core/mountinfo.h"

#include <catch2/catch.hpp>
#include <string>

using rosetctl::Code;
using rosetctl::MountEntry;
using rosetctl::MountTable;

namespace {

// Shaped like a kubelet node: a staging mount and its bind at a pod's target share 8:2 /srv/v1.
constexpr const char* kNodeTable =
    "28 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw,errors=remount-ro\n"
    "22 28 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "100 28 0:50 / /mnt/with\\040space rw,relatime shared:60 master:2 - tmpfs tmp\\040fs "
    "rw,size=1024k\n"
    "101 28 8:2 /srv/v1 /var/lib/kubelet/plugins/x/globalmount rw,relatime shared:1 - ext4 "
    "/dev/sda2 rw\n"
    "102 28 8:2 /srv/v1 /var/lib/kubelet/pods/p/volumes/v ro,nosuid,relatime - ext4 /dev/sda2 rw\n"
    "103 28 8:2 /srv/v2 /var/lib/kubelet/pods/q/volumes/v rw,relatime - ext4 /dev/sda2 rw\n"
    "104 28 0:51 / /mnt/new\\012line\\011tab\\134slash rw - tmpfs none rw\n"
    "105 28 0:52 / /a rw - tmpfs first rw\n"
    "106 105 0:53 / /a rw - tmpfs second rw\n"
    "107 106 0:54 / /a/b rw - tmpfs none rw\n"
    "108 28 0:55 / /ab rw - tmpfs none rw\n"
    "109 28 0:56 / /empty-source rw - tmpfs  rw\n";

MountTable parse_ok(std::string_view text) {
  auto table = MountTable::parse(text);
  INFO(table.status().message());
  REQUIRE(table.has_value());
  return std::move(table).value();
}

std::vector<std::string> mount_points(const std::vector<const MountEntry*>& entries) {
  std::vector<std::string> points;
  for (const MountEntry* entry : entries)
    points.push_back(entry->mount_point);
  return points;
}

}  // namespace

TEST_CASE("mountinfo: every field of a line is parsed", "[mountinfo]") {
  MountTable table = parse_ok(kNodeTable);
  REQUIRE(table.entries().size() == 12);

  const MountEntry& root = table.entries()[0];
  CHECK(root.mount_id == 28);
  CHECK(root.parent_id == 1);
  CHECK(root.major == 8);
  CHECK(root.minor == 2);
  CHECK(root.root == "/");
  CHECK(root.mount_point == "/");
  CHECK(root.mount_options == "rw,relatime");
  CHECK(root.optional_fields == std::vector<std::string>{"shared:1"});
  CHECK(root.fs_type == "ext4");
  CHECK(root.source == "/dev/sda2");
  CHECK(root.super_options == "rw,errors=remount-ro");
  CHECK_FALSE(root.read_only());

  const MountEntry& spaced = table.entries()[2];
  CHECK(spaced.optional_fields == std::vector<std::string>{"shared:60", "master:2"});
  CHECK(spaced.mount_point == "/mnt/with space");
  CHECK(spaced.source == "tmp fs");

  CHECK(table.entries()[8].optional_fields.empty());
  CHECK(table.entries()[11].source.empty());
  CHECK(table.entries()[11].fs_type == "tmpfs");
}

TEST_CASE("mountinfo: octal escapes in paths are decoded", "[mountinfo]") {
  MountTable table = parse_ok(kNodeTable);
  CHECK(table.find_by_target("/mnt/new\nline\ttab\\slash") != nullptr);
  CHECK(table.find_by_target("/mnt/with space") != nullptr);
  CHECK(table.find_by_target("/mnt/with\\040space") == nullptr);
}

TEST_CASE("mountinfo: read_only looks at per-mount options only", "[mountinfo]") {
  MountTable table = parse_ok(kNodeTable);
  CHECK(table.find_by_target("/var/lib/kubelet/pods/p/volumes/v")->read_only());
  // "errors=remount-ro" in the superblock options must not count.
  CHECK_FALSE(table.find_by_target("/")->read_only());
}

TEST_CASE("mountinfo: stacked mounts", "[mountinfo]") {
  MountTable table = parse_ok(kNodeTable);
  CHECK(table.count_at("/a") == 2);
  CHECK(table.count_at("/a/") == 2);
  CHECK(table.count_at("/a/b") == 1);
  CHECK(table.count_at("/nowhere") == 0);
  const MountEntry* top = table.find_by_target("/a");
  REQUIRE(top != nullptr);
  CHECK(top->source == "second");
  CHECK(table.find_by_target("/nowhere") == nullptr);
}

// Found by fuzz_mountinfo (tests/fuzz): a mount point read with a trailing slash was in the
// table but never found by it.
TEST_CASE("mountinfo: a mount point with trailing slashes is found by its path", "[mountinfo]") {
  MountTable table = parse_ok(
      "24 27 0:6 / /devhms// rw,relatime - devtmpfs devtmpfs rw\n"
      "25 27 0:7 / / rw - ext4 /dev/vda1 rw\n");
  REQUIRE(table.entries().size() == 2);
  CHECK(table.entries()[0].mount_point == "/devhms");
  CHECK(table.find_by_target("/devhms") != nullptr);
  CHECK(table.count_at("/devhms/") == 1);
  CHECK(table.entries()[1].mount_point == "/");
}

TEST_CASE("mountinfo: under() matches whole path components", "[mountinfo]") {
  MountTable table = parse_ok(kNodeTable);
  CHECK(mount_points(table.under("/a")) == std::vector<std::string>{"/a", "/a", "/a/b"});
  CHECK(mount_points(table.under("/a/")) == std::vector<std::string>{"/a", "/a", "/a/b"});
  CHECK(mount_points(table.under("/a/b")) == std::vector<std::string>{"/a/b"});
  CHECK(mount_points(table.under("/var/lib/kubelet/pods")) ==
        std::vector<std::string>{"/var/lib/kubelet/pods/p/volumes/v",
                                 "/var/lib/kubelet/pods/q/volumes/v"});
  CHECK(table.under("/mnt/with").empty());
  CHECK(table.under("/var/lib/kubelet/pod").empty());
  CHECK(table.under("/").size() == table.entries().size());
}

TEST_CASE("mountinfo: same_source compares filesystem and directory", "[mountinfo]") {
  MountTable table = parse_ok(kNodeTable);
  const MountEntry* staging = table.find_by_target("/var/lib/kubelet/plugins/x/globalmount");
  const MountEntry* target = table.find_by_target("/var/lib/kubelet/pods/p/volumes/v");
  const MountEntry* other_dir = table.find_by_target("/var/lib/kubelet/pods/q/volumes/v");
  REQUIRE(staging != nullptr);
  REQUIRE(target != nullptr);
  REQUIRE(other_dir != nullptr);
  CHECK(same_source(*staging, *target));
  CHECK_FALSE(same_source(*staging, *other_dir));                  // same device, other directory
  CHECK_FALSE(same_source(*staging, *table.find_by_target("/")));  // same device, root "/"
  CHECK_FALSE(same_source(*table.find_by_target("/ab"), *table.find_by_target("/a/b")));
}

TEST_CASE("mountinfo: empty text is an empty table", "[mountinfo]") {
  CHECK(parse_ok("").entries().empty());
}

TEST_CASE("mountinfo: malformed lines are errors naming the line", "[mountinfo]") {
  const std::string good = "28 1 8:2 / / rw - ext4 /dev/sda2 rw\n";
  auto expect_error = [&](const std::string& bad_line, const std::string& detail) {
    auto table = MountTable::parse(good + bad_line + "\n" + good);
    INFO(bad_line);
    REQUIRE_FALSE(table.has_value());
    CHECK(table.status().code() == Code::kInternal);
    CHECK_THAT(table.status().message(), Catch::Contains("line 2"));
    CHECK_THAT(table.status().message(), Catch::Contains(detail));
  };
  expect_error("1 2 3", "separator");
  expect_error("", "separator");
  expect_error("28 1 8:2 / / rw shared:1 ext4 /dev/sda2 rw", "separator");
  expect_error("28 1 8:2 / / rw - ext4 /dev/sda2", "3 fields after");
  expect_error("28 1 8:2 / / rw - ext4 /dev/sda2 rw extra", "3 fields after");
  expect_error("x 1 8:2 / / rw - ext4 /dev/sda2 rw", "mount id \"x\"");
  expect_error("28 1x 8:2 / / rw - ext4 /dev/sda2 rw", "parent id \"1x\"");
  expect_error("28 1 8-2 / / rw - ext4 /dev/sda2 rw", "device number \"8-2\"");
  expect_error("28 1 8: / / rw - ext4 /dev/sda2 rw", "device number");
  expect_error("28 1 8:2 / /bad\\04 rw - ext4 /dev/sda2 rw", "escape in mount point");
  expect_error("28 1 8:2 / /bad\\x rw - ext4 /dev/sda2 rw", "escape in mount point");
  expect_error("28 1 8:2 /\\999 / rw - ext4 /dev/sda2 rw", "escape in root");
}

TEST_CASE("mountinfo: read() of this process's table finds /", "[mountinfo]") {
  auto table = MountTable::read();
  INFO(table.status().message());
  REQUIRE(table.has_value());
  const MountEntry* root = table->find_by_target("/");
  REQUIRE(root != nullptr);
  CHECK_FALSE(root->fs_type.empty());
  CHECK(table->count_at("/") >= 1);
}

TEST_CASE("mountinfo: read() of a missing file names it", "[mountinfo]") {
  auto table = MountTable::read("/nonexistent/mountinfo");
  REQUIRE_FALSE(table.has_value());
  CHECK(table.status().code() == Code::kNotFound);
  CHECK_THAT(table.status().message(), Catch::Contains("\"/nonexistent/mountinfo\""));
}
