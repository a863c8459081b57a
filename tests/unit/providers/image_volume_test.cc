// Tests for src/providers/common/image_volume.cc: image plans from CreateVolume requests, the
// image files and the capacity policy. Plain files in /tmp; no root needed.
#include "providers/common/image_volume.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "unit/scratch_dir.h"

using rosetctl::AccessType;
using rosetctl::Capability;
using rosetctl::Code;
using rosetctl::CreateVolumeSpec;
using rosetctl::ImageFiles;
using rosetctl::plan_image;
using rosetctl::Status;
using rosetctl::wants_image;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

Capability mount(std::string fs_type = "") {
  Capability capability;
  capability.fs_type = std::move(fs_type);
  return capability;
}

Capability block() {
  Capability capability;
  capability.access_type = AccessType::kBlock;
  return capability;
}

CreateVolumeSpec image_spec(int64_t bytes, std::vector<Capability> capabilities = {mount()}) {
  CreateVolumeSpec spec;
  spec.name = "v";
  spec.required_bytes = bytes;
  spec.parameters = {{"type", "image"}};
  spec.capabilities = std::move(capabilities);
  return spec;
}

using rosetctl::testing::ScratchDir;

int64_t free_bytes(const std::string& path) {
  struct statvfs fs;
  REQUIRE(::statvfs(path.c_str(), &fs) == 0);
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

}  // namespace

TEST_CASE("wants_image: type=image or block access, never a plain dir request", "[image]") {
  CHECK(wants_image(image_spec(kMiB)));
  CreateVolumeSpec spec;
  spec.capabilities = {block()};
  CHECK(wants_image(spec));
  spec.capabilities = {mount()};
  CHECK_FALSE(wants_image(spec));
  spec.parameters = {{"type", "dir"}};
  CHECK_FALSE(wants_image(spec));
}

TEST_CASE("plan_image picks the filesystem from the capability, ext4 by default", "[image]") {
  auto plain = plan_image(image_spec(64 * kMiB));
  REQUIRE(plain);
  CHECK(plain->filesystem == "ext4");
  CHECK_FALSE(plain->block);
  CHECK(plain->bytes == 64 * kMiB);
  auto xfs = plan_image(image_spec(320 * kMiB, {mount("xfs"), mount()}));
  REQUIRE(xfs);
  CHECK(xfs->filesystem == "xfs");
  auto raw = plan_image(image_spec(kMiB, {block()}));
  REQUIRE(raw);
  CHECK(raw->block);
  CHECK(raw->filesystem.empty());
}

TEST_CASE("plan_image refuses unsupported and contradictory filesystems", "[image]") {
  auto btrfs = plan_image(image_spec(64 * kMiB, {mount("btrfs")}));
  REQUIRE_FALSE(btrfs);
  CHECK(btrfs.status().code() == Code::kInvalidArgument);
  CHECK_THAT(btrfs.status().message(), Catch::Contains("supported: ext4, xfs"));
  auto both = plan_image(image_spec(320 * kMiB, {mount("ext4"), mount("xfs")}));
  REQUIRE_FALSE(both);
  CHECK(both.status().code() == Code::kInvalidArgument);
}

TEST_CASE("plan_image checks sizes up front", "[image]") {
  auto unsized = plan_image(image_spec(0));  // COs may leave the size to us
  REQUIRE(unsized);
  CHECK(unsized->bytes == rosetctl::kDefaultImageBytes);

  auto small_xfs = plan_image(image_spec(299 * kMiB, {mount("xfs")}));
  REQUIRE_FALSE(small_xfs);
  CHECK(small_xfs.status().code() == Code::kOutOfRange);
  CHECK_THAT(small_xfs.status().message(), Catch::Contains("at least 300Mi"));
  CHECK(plan_image(image_spec(300 * kMiB, {mount("xfs")})));

  auto small_ext4 = plan_image(image_spec(512 * 1024));
  REQUIRE_FALSE(small_ext4);
  CHECK_THAT(small_ext4.status().message(), Catch::Contains("at least 1Mi"));

  auto rounded = plan_image(image_spec(1000, {block()}));
  REQUIRE(rounded);
  CHECK(rounded->bytes == 4096);

  CreateVolumeSpec limited = image_spec(1000, {block()});
  limited.limit_bytes = 2000;
  auto over = plan_image(limited);
  REQUIRE_FALSE(over);
  CHECK(over.status().code() == Code::kOutOfRange);

  CreateVolumeSpec only_limit = image_spec(0, {block()});
  only_limit.limit_bytes = 8192;
  auto from_limit = plan_image(only_limit);
  REQUIRE(from_limit);
  CHECK(from_limit->bytes == 8192);
}

TEST_CASE("ImageFiles creates sparse images of the exact size and removes them", "[image]") {
  ScratchDir dir;
  ImageFiles files(dir / "images", /*overcommit=*/false);
  REQUIRE(files.create("local-a", 64 * kMiB));
  struct stat st;
  REQUIRE(::stat(files.image("local-a").c_str(), &st) == 0);
  CHECK(st.st_size == 64 * kMiB);
  CHECK(st.st_blocks == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(files.create("local-a", kMiB).code() == Code::kAlreadyExists);

  REQUIRE(files.remove("local-a"));
  CHECK_FALSE(exists(files.image("local-a")));
  CHECK(files.remove("local-a"));  // already gone: fine
}

TEST_CASE("ImageFiles tells its images' volume ids from other paths", "[image]") {
  ImageFiles files("/var/lib/rosetctl/images", false);
  CHECK(files.volume_of_image("/var/lib/rosetctl/images/local-ab12.img") == "local-ab12");
  CHECK(files.volume_of_image(files.image("local-x")) == "local-x");
  CHECK(files.volume_of_image("/var/lib/rosetctl/images/local-ab12.grow").empty());
  CHECK(files.volume_of_image("/var/lib/rosetctl/images/sub/local-ab12.img").empty());
  CHECK(files.volume_of_image("/var/lib/rosetctl/images2/local-ab12.img").empty());
  CHECK(files.volume_of_image("/tmp/local-ab12.img").empty());
  CHECK(files.volume_of_image("/var/lib/rosetctl/images/.img").empty());
}

TEST_CASE("ImageFiles grows images, marking the filesystem's growth first", "[image]") {
  ScratchDir dir;
  ImageFiles files(dir / "images", false);
  REQUIRE(files.create("local-g", 8 * kMiB));
  REQUIRE(files.grow("local-g", 16 * kMiB, /*filesystem_follows=*/true));
  struct stat st;
  REQUIRE(::stat(files.image("local-g").c_str(), &st) == 0);
  CHECK(st.st_size == 16 * kMiB);
  CHECK(files.grow_pending("local-g"));
  REQUIRE(files.clear_grow_pending("local-g"));
  CHECK_FALSE(files.grow_pending("local-g"));

  REQUIRE(files.grow("local-g", 4 * kMiB, true));  // never shrinks, marks nothing
  REQUIRE(::stat(files.image("local-g").c_str(), &st) == 0);
  CHECK(st.st_size == 16 * kMiB);
  CHECK_FALSE(files.grow_pending("local-g"));

  REQUIRE(files.grow("local-g", 32 * kMiB, /*filesystem_follows=*/false));  // a block volume
  CHECK_FALSE(files.grow_pending("local-g"));
  REQUIRE(files.mark_grow_pending("local-g"));
  REQUIRE(files.remove("local-g"));
  CHECK_FALSE(exists(files.grow_marker("local-g")));
}

TEST_CASE("the capacity policy counts the unwritten part of images as taken", "[image]") {
  ScratchDir dir;
  ImageFiles strict(dir / "images", false);
  ImageFiles overcommit(dir / "images", true);
  // Large enough to stand out from whatever else writes to this filesystem meanwhile.
  const int64_t promised = 2048 * kMiB;
  const int64_t slack = 512 * kMiB;
  REQUIRE(strict.create("local-p", promised));
  auto plain = overcommit.available_bytes();
  auto counted = strict.available_bytes();
  REQUIRE(plain);
  REQUIRE(counted);
  CHECK(*counted >= *plain - promised - slack);
  CHECK(*counted <= *plain - promised + slack);

  // Beyond the free space: refused under the policy, allowed with overcommit.
  int64_t too_big = 2 * free_bytes("/tmp") + 1024 * kMiB;
  Status refused = strict.create("local-big", too_big);
  CHECK(refused.code() == Code::kResourceExhausted);
  CHECK_THAT(refused.message(), Catch::Contains("--capacity-overcommit"));
  CHECK_FALSE(exists(strict.image("local-big")));
  CHECK(overcommit.create("local-big", too_big));
  CHECK(strict.grow("local-p", too_big, false).code() == Code::kResourceExhausted);
}

TEST_CASE("concurrent creates never promise more than is free", "[image]") {
  ScratchDir dir;
  ImageFiles strict(dir / "images", false);
  auto available = strict.available_bytes();
  REQUIRE(available);
  // Room for three, with half an image of slack for whatever else writes to /tmp meanwhile.
  const int64_t size = *available * 2 / 7;
  std::atomic<int> created{0};
  std::vector<std::thread> creators;
  for (int i = 0; i < 8; ++i) {
    creators.emplace_back([&, i] {
      if (strict.create("local-c" + std::to_string(i), size)) ++created;
    });
  }
  for (std::thread& creator : creators)
    creator.join();
  CHECK(created == 3);
}

TEST_CASE("ImageFiles names a filled image only once it is complete", "[image]") {
  ScratchDir dir;
  ImageFiles files(dir / "images", /*overcommit=*/true);
  REQUIRE(files.create_filled("local-r", 8 * kMiB, /*filesystem_follows=*/true, [](int fd) {
    return ::pwrite(fd, "restored", 8, kMiB) == 8 ? Status::ok()
                                                  : Status(Code::kInternal, "write failed");
  }));
  struct stat st;
  REQUIRE(::stat(files.image("local-r").c_str(), &st) == 0);
  CHECK(st.st_size == 8 * kMiB);  // filled with less, then sized
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_blocks * 512 < 8 * kMiB);  // the rest stays a hole
  CHECK(files.grow_pending("local-r"));  // the filesystem inside grows at first stage

  Status failed = files.create_filled("local-f", 8 * kMiB, true, [](int) {
    return Status(Code::kDataLoss, "the source is damaged");
  });
  CHECK(failed.code() == Code::kDataLoss);
  CHECK_FALSE(exists(files.image("local-f")));
  CHECK_FALSE(files.grow_pending("local-f"));
  std::size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "images")) {
    (void)entry;
    ++entries;
  }
  CHECK(entries == 2);  // local-r's image and marker: no temporary file
  CHECK(files.create_filled("local-r", kMiB, false, [](int) { return Status::ok(); }).code() ==
        Code::kAlreadyExists);
}

TEST_CASE("a filling image's room is reserved for the whole fill", "[image]") {
  ScratchDir dir;
  ImageFiles strict(dir / "images", false);
  auto before = strict.available_bytes();
  REQUIRE(before);
  // Large enough to stand out from whatever else writes to this filesystem meanwhile.
  const int64_t size = std::min<int64_t>(2048 * kMiB, *before / 2);
  const int64_t slack = size / 4;
  std::optional<int64_t> during;
  REQUIRE(strict.create_filled("local-f", size, false, [&](int) {
    auto available = strict.available_bytes();
    if (available) during = *available;
    // A create that would need the reserved room is refused meanwhile.
    Status second = strict.create("local-x", *before - size / 2);
    return second.code() == Code::kResourceExhausted
               ? Status::ok()
               : Status(Code::kInternal, "second create not refused");
  }));
  REQUIRE(during);
  CHECK(*during <= *before - size + slack);

  // A fill that fails leaves neither an image nor its reservation.
  Status failed = strict.create_filled("local-g", 8 * kMiB, false, [](int) {
    return Status(Code::kDataLoss, "the source is damaged");
  });
  CHECK(failed.code() == Code::kDataLoss);
  CHECK_FALSE(exists(dir / "images/local-g.reserved"));
  CHECK_FALSE(exists(strict.image("local-g")));
  CHECK_FALSE(exists(dir / "images/local-f.reserved"));  // the image holds the promise now
  CHECK(exists(strict.image("local-f")));

  // A reservation left by a create that died (nobody holds its lock) is dropped.
  std::string stale = dir / "images/local-dead.reserved";
  std::ofstream(stale).close();
  REQUIRE(::truncate(stale.c_str(), size) == 0);
  auto after = strict.available_bytes();
  REQUIRE(after);
  CHECK_FALSE(exists(stale));
}
