// Loop device attach/detach through /dev/loop-control and the loop ioctls; discovery through
// /sys/block/loop*/ (no losetup, no udev: device nodes come from devtmpfs, or are made here).
#include "core/loop_device.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include "core/directory_listing.h"

namespace rosetctl {
namespace {

constexpr const char* kLoopControl = "/dev/loop-control";
constexpr std::string_view kDeletedMark = " (deleted)";
// LOOP_CTL_GET_FREE hands the same free device to racing callers; the loser sees EBUSY.
constexpr int kAttachAttempts = 16;

std::string device_path(int number) {
  return fmt::format("/dev/loop{}", number);
}

// One line of a sysfs attribute without its newline; empty when unreadable.
std::string read_attribute(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Opens /dev/loopN; when there is no such node (a /dev without devtmpfs), makes it from the
// numbers sysfs gives.
Expected<UniqueFd> open_device(int number, int flags) {
  std::string path = device_path(number);
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (fd.valid() || errno != ENOENT) {
    if (fd.valid()) return fd;
    return errno_status(errno, fmt::format("cannot open loop device \"{}\"", path));
  }
  std::string numbers = read_attribute(fmt::format("/sys/block/loop{}/dev", number));
  unsigned major = 0;
  unsigned minor = 0;
  if (std::sscanf(numbers.c_str(), "%u:%u", &major, &minor) != 2) {
    return error(Code::kInternal,
                 "loop device \"{}\" has no device node and sysfs gives no "
                 "device numbers for it",
                 path);
  }
  if (::mknod(path.c_str(), S_IFBLK | 0600, ::makedev(major, minor)) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create device node \"{}\"", path));
  }
  fd = UniqueFd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open loop device \"{}\"", path));
  return fd;
}

Expected<UniqueFd> open_backing_file(const std::string& file, bool read_only, bool direct_io) {
  int flags = (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | (direct_io ? O_DIRECT : 0);
  UniqueFd fd(::open(file.c_str(), flags));
  if (!fd.valid()) {
    return errno_status(errno, fmt::format("cannot open loop backing file \"{}\"", file));
  }
  return fd;
}

// One LOOP_CONFIGURE attempt on device `number`; returns the errno (0 on success).
int configure(int loop_fd, int file_fd, const std::string& file, const LoopAttachOptions& options,
              bool direct_io) {
  loop_config config;
  std::memset(&config, 0, sizeof(config));
  config.fd = static_cast<uint32_t>(file_fd);
  // Always 512-byte sectors. Left to the kernel (0), a direct-I/O device takes the backing
  // file's direct-I/O alignment, which can change under a file: xfs raises it to its block size
  // once the file shares extents (a reflink snapshot), and a filesystem made with 512-byte
  // sectors then no longer mounts (ENOSYS). With 512 the device looks the same on every attach;
  // where the file cannot do 512-byte direct I/O, the kernel refuses it (EINVAL) and the
  // device is attached buffered instead (see LoopDevice::attach).
  config.block_size = kLoopSectorBytes;
  config.info.lo_flags = (options.autoclear ? LO_FLAGS_AUTOCLEAR : 0) |
                         (options.read_only ? LO_FLAGS_READ_ONLY : 0) |
                         (direct_io ? LO_FLAGS_DIRECT_IO : 0);
  std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), file.c_str(), LO_NAME_SIZE - 1);
  return ::ioctl(loop_fd, LOOP_CONFIGURE, &config) == 0 ? 0 : errno;
}

bool parse_loop_number(std::string_view name, int* number) {
  if (!name.starts_with("loop") || name.size() == 4) return false;
  int value = 0;
  for (char c : name.substr(4)) {
    if (c < '0' || c > '9' || value > 100'000'000) return false;
    value = value * 10 + (c - '0');
  }
  *number = value;
  return true;
}

Status loop_ioctl(const std::string& device, unsigned long request, std::string_view what) {
  UniqueFd fd(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid())
    return errno_status(errno, fmt::format("cannot open \"{}\" to {}", device, what));
  if (::ioctl(fd.get(), request, 0) != 0) {
    return errno_status(errno, fmt::format("cannot {} \"{}\"", what, device));
  }
  return Status::ok();
}

}  // namespace

LoopDevice::LoopDevice(UniqueFd fd, int number, bool direct_io)
    : fd_(std::move(fd)), path_(device_path(number)), number_(number), direct_io_(direct_io) {}

Expected<LoopDevice> LoopDevice::attach(const std::string& backing_file,
                                        const LoopAttachOptions& options) {
  UniqueFd control(::open(kLoopControl, O_RDWR | O_CLOEXEC));
  if (!control.valid()) {
    return errno_status(
        errno, fmt::format("cannot open \"{}\" (is the loop module loaded?)", kLoopControl));
  }
  bool direct_io = options.direct_io;
  for (int attempt = 0; attempt < kAttachAttempts; ++attempt) {
    int number = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (number < 0) return errno_status(errno, "cannot get a free loop device");
    auto loop = open_device(number, options.read_only ? O_RDONLY : O_RDWR);
    if (!loop) return loop.status();

    auto file = open_backing_file(backing_file, options.read_only, direct_io);
    if (!file && direct_io && file.status().code() == Code::kInvalidArgument) {
      direct_io = false;  // the backing filesystem refuses O_DIRECT (tmpfs before 6.6, ...)
      file = open_backing_file(backing_file, options.read_only, false);
    }
    if (!file) return file.status();
    int err = configure(loop->get(), file->get(), backing_file, options, direct_io);
    if (err == EINVAL && direct_io) {
      // Direct I/O needs the device's sector size to suit the backing file system; without it
      // the loop device still works, through the page cache.
      direct_io = false;
      file = open_backing_file(backing_file, options.read_only, false);
      if (!file) return file.status();
      err = configure(loop->get(), file->get(), backing_file, options, false);
    }
    if (err == EBUSY) continue;  // another attach took this device first: ask for another
    if (err != 0) {
      return errno_status(
          err, fmt::format("cannot attach \"{}\" to \"{}\"", backing_file, device_path(number)));
    }
    bool effective = read_attribute(fmt::format("/sys/block/loop{}/loop/dio", number)) == "1";
    return LoopDevice(std::move(*loop), number, effective);
  }
  return error(Code::kAborted,
               "cannot attach \"{}\": free loop devices kept being taken by others ({} tries); "
               "retry",
               backing_file, kAttachAttempts);
}

LoopDevice::~LoopDevice() {
  reset();
}

LoopDevice::LoopDevice(LoopDevice&& other) noexcept
    : fd_(std::move(other.fd_)),
      path_(std::move(other.path_)),
      number_(std::exchange(other.number_, -1)),
      direct_io_(other.direct_io_) {}

LoopDevice& LoopDevice::operator=(LoopDevice&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::move(other.fd_);
    path_ = std::move(other.path_);
    number_ = std::exchange(other.number_, -1);
    direct_io_ = other.direct_io_;
  }
  return *this;
}

void LoopDevice::release() {
  fd_.reset();
}

void LoopDevice::reset() {
  if (fd_.valid()) (void)::ioctl(fd_.get(), LOOP_CLR_FD, 0);  // best effort
  fd_.reset();
}

Expected<std::vector<LoopInfo>> list_loop_devices(const std::string& sysfs_block) {
  auto names = list_directory(sysfs_block);
  if (!names) return names.status();
  std::vector<LoopInfo> out;
  for (const std::string& name : *names) {
    LoopInfo info;
    if (!parse_loop_number(name.c_str(), &info.number)) continue;
    std::string base = fmt::format("{}/{}", sysfs_block, name);
    // backing_file exists only while something is attached; a device detached between two
    // reads shows an empty value and is skipped like a free one.
    std::string backing = read_attribute(base + "/loop/backing_file");
    if (backing.empty()) continue;
    if (backing.ends_with(kDeletedMark)) {
      backing.resize(backing.size() - kDeletedMark.size());
      info.backing_deleted = true;
    }
    info.path = device_path(info.number);
    info.backing_file = std::move(backing);
    info.read_only = read_attribute(base + "/ro") == "1";
    info.autoclear = read_attribute(base + "/loop/autoclear") == "1";
    info.direct_io = read_attribute(base + "/loop/dio") == "1";
    std::sscanf(read_attribute(base + "/dev").c_str(), "%u:%u", &info.major, &info.minor);
    info.size_bytes = std::strtoll(read_attribute(base + "/size").c_str(), nullptr, 10) * 512;
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const LoopInfo& a, const LoopInfo& b) { return a.number < b.number; });
  return out;
}

std::optional<FileIdentity> file_identity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{::major(st.st_dev), ::minor(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

std::optional<FileIdentity> loop_backing_identity(const LoopInfo& loop) {
  // open_device may make the node from sysfs's numbers (a container's own /dev).
  auto fd = open_device(loop.number, O_RDONLY);
  if (!fd) return std::nullopt;
  loop_info64 info;
  std::memset(&info, 0, sizeof(info));
  if (::ioctl(fd->get(), LOOP_GET_STATUS64, &info) != 0) return std::nullopt;
  // The kernel encodes lo_device with huge_encode_dev (new_encode_dev), not glibc's makedev.
  uint64_t dev = info.lo_device;
  return FileIdentity{static_cast<unsigned>((dev & 0xfff00) >> 8),
                      static_cast<unsigned>((dev & 0xff) | ((dev >> 12) & 0xfff00)),
                      static_cast<uint64_t>(info.lo_inode)};
}

bool loop_backed_by(const LoopInfo& loop, const std::string& path,
                    const std::optional<FileIdentity>& identity) {
  if (identity) {
    std::optional<FileIdentity> backing = loop_backing_identity(loop);
    if (backing)
      return *backing == *identity || (loop.backing_deleted && loop.backing_file == path);
  }
  return loop.backing_file == path;
}

Expected<std::vector<LoopInfo>> loop_devices_backed_by(const std::string& file) {
  auto all = list_loop_devices();
  if (!all) return all.status();
  std::optional<FileIdentity> identity = file_identity(file);
  std::vector<LoopInfo> out;
  for (LoopInfo& info : *all) {
    if (loop_backed_by(info, file, identity)) out.push_back(std::move(info));
  }
  return out;
}

Status detach_loop_device(const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENXIO) return Status::ok();  // no such device: nothing bound
    return errno_status(errno, fmt::format("cannot open \"{}\" to detach it", device));
  }
  if (::ioctl(fd.get(), LOOP_CLR_FD, 0) == 0 || errno == ENXIO) return Status::ok();
  return errno_status(errno, fmt::format("cannot detach loop device \"{}\"", device));
}

Status refresh_loop_capacity(const std::string& device) {
  return loop_ioctl(device, LOOP_SET_CAPACITY, "refresh the capacity of loop device");
}

Status set_loop_direct_io(const std::string& device, bool direct_io) {
  UniqueFd fd(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return errno_status(errno, fmt::format("cannot open \"{}\" to switch direct I/O", device));
  }
  if (::ioctl(fd.get(), LOOP_SET_DIRECT_IO, static_cast<unsigned long>(direct_io)) == 0) {
    return Status::ok();
  }
  if (errno == EINVAL && direct_io) {
    return error(Code::kInvalidArgument,
                 "the kernel refuses direct I/O on loop device \"{}\" (its backing file's "
                 "filesystem or block size does not allow it)",
                 device);
  }
  return errno_status(errno, fmt::format("cannot switch direct I/O {} on loop device \"{}\"",
                                         direct_io ? "on" : "off", device));
}

Expected<uint32_t> direct_io_alignment(const std::string& file) {
  struct statx st;
  if (::statx(AT_FDCWD, file.c_str(), 0, STATX_DIOALIGN, &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", file));
  }
  if ((st.stx_mask & STATX_DIOALIGN) != 0) return st.stx_dio_offset_align;
  // An older kernel, or a filesystem that does not say: try it, and take the logical block
  // size of the disk underneath (what the kernel then asks of a loop device), 512 where there
  // is none to read (tmpfs, overlay).
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
  if (!fd.valid()) {
    if (errno == EINVAL) return 0u;
    return errno_status(errno, fmt::format("cannot open \"{}\"", file));
  }
  std::string disk = fmt::format("/sys/dev/block/{}:{}", st.stx_dev_major, st.stx_dev_minor);
  for (const char* queue : {"/queue/logical_block_size", "/../queue/logical_block_size"}) {
    std::string text = read_attribute(disk + queue);  // a partition's queue is its disk's
    if (!text.empty()) return static_cast<uint32_t>(std::strtoul(text.c_str(), nullptr, 10));
  }
  return kLoopSectorBytes;
}

Expected<bool> file_allows_direct_io(const std::string& file) {
  auto alignment = direct_io_alignment(file);
  if (!alignment) return alignment.status();
  return loop_direct_io_fits(*alignment);
}

std::string direct_io_refusal(uint32_t alignment) {
  if (alignment == 0) return "its filesystem cannot do direct I/O";
  return fmt::format(
      "its filesystem asks for {}-byte aligned direct I/O (xfs does once a file shares extents "
      "with a reflinked snapshot or clone) and loop devices here use {}-byte sectors",
      alignment, kLoopSectorBytes);
}

Expected<int64_t> block_device_size(const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open \"{}\"", device));
  uint64_t bytes = 0;
  if (::ioctl(fd.get(), BLKGETSIZE64, &bytes) != 0) {
    return errno_status(errno, fmt::format("cannot read the size of \"{}\"", device));
  }
  return static_cast<int64_t>(bytes);
}

}  // namespace rosetctl
