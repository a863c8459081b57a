// Tests for src/core/loop_device.cc. Parsing of sysfs runs anywhere on a fake tree; attaching
// real loop devices needs root (ROSETCTL_REQUIRE_ROOT_TESTS=1 makes skipping a failure).
#include "core/loop_device.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include "unit/root_tests.h"
#include "unit/scratch_dir.h"

using rosetctl::block_device_size;
using rosetctl::Code;
using rosetctl::detach_loop_device;
using rosetctl::file_allows_direct_io;
using rosetctl::list_loop_devices;
using rosetctl::loop_devices_backed_by;
using rosetctl::LoopAttachOptions;
using rosetctl::LoopDevice;
using rosetctl::LoopInfo;
using rosetctl::refresh_loop_capacity;
using rosetctl::set_loop_direct_io;
using rosetctl::Status;

using rosetctl::testing::have_root;

namespace {

class ScratchDir {
 public:
  ScratchDir() : scratch_("loop-test"), path_(scratch_.path) {}
  ~ScratchDir() {
    // Whatever a test left attached to our files goes first, so no device outlives the test.
    if (auto leftovers = list_loop_devices()) {
      for (const LoopInfo& info : *leftovers) {
        if (info.backing_file.starts_with(path_ + "/")) (void)detach_loop_device(info.path);
      }
    }
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name, off_t size) const {
    std::string path = path_ + "/" + name;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, size) == 0);
    ::close(fd);
    return path;
  }
  void write(const std::string& relative, const std::string& text) const {
    std::filesystem::path path = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  const std::string& path() const { return path_; }

 private:
  rosetctl::testing::ScratchDir scratch_;  // removed after the devices are detached
  std::string path_;
};

std::vector<LoopInfo> backed_by(const std::string& file) {
  auto found = loop_devices_backed_by(file);
  REQUIRE(found);
  return *found;
}

// The kernel detaches an autoclear device when its last opener closes it; allow it a moment.
bool detached_soon(const std::string& file) {
  for (int i = 0; i < 100; ++i) {
    if (backed_by(file).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

TEST_CASE("list_loop_devices reads attached devices from sysfs and skips free ones",
          "[loop_device]") {
  ScratchDir sysfs;
  sysfs.write("loop0/loop/backing_file", "/var/lib/rosetctl/images/a.img\n");
  sysfs.write("loop0/loop/autoclear", "1\n");
  sysfs.write("loop0/loop/dio", "1\n");
  sysfs.write("loop0/ro", "0\n");
  sysfs.write("loop0/dev", "7:0\n");
  sysfs.write("loop0/size", "131072\n");
  sysfs.write("loop12/loop/backing_file", "/var/lib/rosetctl/images/b img (deleted)\n");
  sysfs.write("loop12/ro", "1\n");
  sysfs.write("loop12/dev", "7:12\n");
  sysfs.write("loop12/size", "8\n");
  sysfs.write("loop3/ro", "0\n");  // free: no backing file
  sysfs.write("vda/size", "1\n");
  sysfs.write("loopback/size", "1\n");

  auto found = list_loop_devices(sysfs.path());
  REQUIRE(found);
  REQUIRE(found->size() == 2);
  const LoopInfo& first = (*found)[0];
  CHECK(first.number == 0);
  CHECK(first.path == "/dev/loop0");
  CHECK(first.backing_file == "/var/lib/rosetctl/images/a.img");
  CHECK_FALSE(first.backing_deleted);
  CHECK(first.autoclear);
  CHECK(first.direct_io);
  CHECK_FALSE(first.read_only);
  CHECK(first.major == 7);
  CHECK(first.minor == 0);
  CHECK(first.size_bytes == 64 << 20);
  const LoopInfo& second = (*found)[1];
  CHECK(second.number == 12);
  CHECK(second.backing_file == "/var/lib/rosetctl/images/b img");
  CHECK(second.backing_deleted);
  CHECK(second.read_only);
  CHECK(second.size_bytes == 4096);
}

TEST_CASE("LoopDevice::attach attaches a file and the guard detaches it", "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("guarded.img", 16 << 20);
  {
    auto loop = LoopDevice::attach(image, LoopAttachOptions{.autoclear = false});
    REQUIRE(loop);
    std::vector<LoopInfo> found = backed_by(image);
    REQUIRE(found.size() == 1);
    CHECK(found[0].path == loop->path());
    CHECK(found[0].size_bytes == 16 << 20);
    CHECK_FALSE(found[0].autoclear);
    CHECK_FALSE(found[0].read_only);
    CHECK(found[0].direct_io == loop->direct_io());
    auto size = block_device_size(loop->path());
    REQUIRE(size);
    CHECK(*size == 16 << 20);
  }
  CHECK(backed_by(image).empty());
}

TEST_CASE("a released autoclear device goes away once nothing holds it", "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("autoclear.img", 8 << 20);
  auto loop = LoopDevice::attach(image, LoopAttachOptions{});
  REQUIRE(loop);
  CHECK(backed_by(image).at(0).autoclear);
  loop->release();
  CHECK(detached_soon(image));
}

TEST_CASE("a released device without autoclear stays until detached", "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("kept.img", 8 << 20);
  auto loop = LoopDevice::attach(image, LoopAttachOptions{.autoclear = false});
  REQUIRE(loop);
  std::string path = loop->path();
  loop->release();
  REQUIRE(backed_by(image).size() == 1);
  REQUIRE(detach_loop_device(path));
  CHECK(detached_soon(image));
  CHECK(detach_loop_device(path));  // nothing attached any more: still fine
}

TEST_CASE("a read-only loop device refuses writes", "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("ro.img", 8 << 20);
  auto loop = LoopDevice::attach(image, LoopAttachOptions{.read_only = true, .autoclear = false});
  REQUIRE(loop);
  CHECK(backed_by(image).at(0).read_only);
  // Older kernels refuse the open itself; newer ones (6.x) refuse the write.
  int fd = ::open(loop->path().c_str(), O_WRONLY);
  if (fd < 0) {
    CHECK((errno == EROFS || errno == EACCES));
    return;
  }
  char block[512] = {};
  CHECK(::write(fd, block, sizeof(block)) < 0);
  CHECK((errno == EPERM || errno == EROFS));
  ::close(fd);
}

TEST_CASE("refresh_loop_capacity makes the device follow its grown file", "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("grow.img", 8 << 20);
  auto loop = LoopDevice::attach(image, LoopAttachOptions{.autoclear = false});
  REQUIRE(loop);
  REQUIRE(::truncate(image.c_str(), 24 << 20) == 0);
  CHECK(*block_device_size(loop->path()) == 8 << 20);
  REQUIRE(refresh_loop_capacity(loop->path()));
  CHECK(*block_device_size(loop->path()) == 24 << 20);
  CHECK(backed_by(image).at(0).size_bytes == 24 << 20);
}

TEST_CASE("set_loop_direct_io switches an attached device both ways", "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("dio.img", 8 << 20);
  auto loop = LoopDevice::attach(image, LoopAttachOptions{.autoclear = false, .direct_io = false});
  REQUIRE(loop);
  CHECK_FALSE(loop->direct_io());
  CHECK_FALSE(backed_by(image).at(0).direct_io);
  auto allowed = file_allows_direct_io(image);
  REQUIRE(allowed);
  Status on = set_loop_direct_io(loop->path(), true);
  if (*allowed) {
    // What file_allows_direct_io promises, the kernel must grant.
    REQUIRE(on);
    CHECK(backed_by(image).at(0).direct_io);
  } else {
    CHECK(on.code() == Code::kInvalidArgument);  // a filesystem without O_DIRECT: says so
  }
  REQUIRE(set_loop_direct_io(loop->path(), false));
  CHECK_FALSE(backed_by(image).at(0).direct_io);
  REQUIRE(set_loop_direct_io(loop->path(), false));  // idempotent
  CHECK(file_allows_direct_io(dir.path() + "/missing.img").status().code() == Code::kNotFound);
}

TEST_CASE("direct_io_alignment says what direct I/O on a file needs", "[loop_device]") {
  ScratchDir dir;
  std::string image = dir.file("align.img", 1 << 20);
  auto alignment = rosetctl::direct_io_alignment(image);
  REQUIRE(alignment);
  // A power of two, or 0 where the filesystem cannot do direct I/O at all.
  CHECK((*alignment & (*alignment - 1)) == 0);
  CHECK(rosetctl::direct_io_refusal(4096).find("4096-byte aligned") != std::string::npos);
  CHECK(rosetctl::direct_io_refusal(0).find("cannot do direct I/O") != std::string::npos);
}

TEST_CASE("two attaches of one file get two devices; both are found by their file",
          "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("twice.img", 8 << 20);
  auto first = LoopDevice::attach(image, LoopAttachOptions{.autoclear = false});
  auto second = LoopDevice::attach(image, LoopAttachOptions{.read_only = true, .autoclear = false});
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->path() != second->path());
  CHECK(backed_by(image).size() == 2);
}

TEST_CASE("a loop device whose file was deleted is still found by that file's path",
          "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("deleted.img", 8 << 20);
  auto loop = LoopDevice::attach(image, LoopAttachOptions{.autoclear = false});
  REQUIRE(loop);
  REQUIRE(::unlink(image.c_str()) == 0);
  std::vector<LoopInfo> found = backed_by(image);
  REQUIRE(found.size() == 1);
  CHECK(found[0].backing_deleted);
}

TEST_CASE("a loop device is found by its file's device and inode, whatever path sysfs shows",
          "[loop_device][root]") {
  // sysfs shows the path the device was attached through; from another mount namespace (a
  // restarted node plugin's container) that path can name nothing, or another file. A hard link
  // shows the same: another path to the same file.
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string image = dir.file("image.img", 8 << 20);
  std::string link = dir.path() + "/attached-through.img";
  REQUIRE(::link(image.c_str(), link.c_str()) == 0);
  auto loop = LoopDevice::attach(link, LoopAttachOptions{.autoclear = false});
  REQUIRE(loop);
  std::vector<LoopInfo> found = backed_by(image);
  REQUIRE(found.size() == 1);
  CHECK(found[0].path == loop->path());
  CHECK(found[0].backing_file == link);
  auto identity = rosetctl::file_identity(image);
  REQUIRE(identity);
  CHECK(rosetctl::loop_backing_identity(found[0]) == identity);

  // Another file at a path a device shows is not its backing file.
  std::string other = dir.file("other.img", 8 << 20);
  CHECK(backed_by(other).empty());
  CHECK_FALSE(rosetctl::loop_backed_by(found[0], link, rosetctl::file_identity(other)));
}

TEST_CASE("attaching a missing file fails, naming it, and leaves no device",
          "[loop_device][root]") {
  if (!have_root("to attach loop devices")) return;
  ScratchDir dir;
  std::string missing = dir.path() + "/missing.img";
  auto loop = LoopDevice::attach(missing, LoopAttachOptions{});
  REQUIRE_FALSE(loop);
  CHECK_THAT(loop.status().message(), Catch::Contains(missing));
  CHECK(backed_by(missing).empty());
}
