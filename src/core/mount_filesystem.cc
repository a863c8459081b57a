// Device filesystems and tmpfs, built detached with fsopen/fsconfig/fsmount and attached to a
// pinned mount point (core/mount_point.h).
#include "core/mount_filesystem.h"

#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "core/mount_point.h"
#include "core/unique_fd.h"

namespace rosetctl {
namespace {

// What the kernel said about a failed fsconfig: each read(2) of the context returns one
// message ("e ext4: Can't find ext4 filesystem"); ENODATA when there are no more.
std::string kernel_messages(int fs_fd) {
  std::string out;
  char buffer[512];
  for (int i = 0; i < 8; ++i) {
    ssize_t n = ::read(fs_fd, buffer, sizeof buffer - 1);
    if (n <= 0) break;
    std::string_view line(buffer, static_cast<size_t>(n));
    while (!line.empty() && line.back() == '\n')
      line.remove_suffix(1);
    if (line.size() > 2 && line[1] == ' ') line.remove_prefix(2);  // "e ", "w ", "i "
    out += out.empty() ? "" : "; ";
    out += line;
  }
  return out;
}

Status config_failure(int err, int fs_fd, std::string_view what) {
  std::string said = kernel_messages(fs_fd);
  Status status = errno_status(err, std::string(what));
  if (said.empty()) return status;
  return {status.code(), fmt::format("{} (kernel: {})", status.message(), said)};
}

// "size=16k,mode=0700,nouuid": each key=value a string parameter, each bare word a flag.
Status configure(int fs_fd, std::string_view data, std::string_view what) {
  size_t start = 0;
  while (start < data.size()) {
    size_t comma = std::min(data.find(',', start), data.size());
    std::string item(data.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    size_t equals = item.find('=');
    int rc = equals == std::string::npos
                 ? ::fsconfig(fs_fd, FSCONFIG_SET_FLAG, item.c_str(), nullptr, 0)
                 : ::fsconfig(fs_fd, FSCONFIG_SET_STRING, item.substr(0, equals).c_str(),
                              item.substr(equals + 1).c_str(), 0);
    if (rc != 0) {
      int err = errno;
      return config_failure(err, fs_fd, fmt::format("{}: option \"{}\"", what, item));
    }
  }
  return Status::ok();
}

unsigned mount_attributes(unsigned long flags) {
  unsigned attributes = 0;
  if (flags & MS_RDONLY) attributes |= MOUNT_ATTR_RDONLY;
  if (flags & MS_NOSUID) attributes |= MOUNT_ATTR_NOSUID;
  if (flags & MS_NODEV) attributes |= MOUNT_ATTR_NODEV;
  if (flags & MS_NOEXEC) attributes |= MOUNT_ATTR_NOEXEC;
  if (flags & MS_NODIRATIME) attributes |= MOUNT_ATTR_NODIRATIME;
  if (flags & MS_NOATIME) attributes |= MOUNT_ATTR_NOATIME;
  if (flags & MS_STRICTATIME) attributes |= MOUNT_ATTR_STRICTATIME;
  return attributes;
}

// A new filesystem of `type` from `source` with `data`, mounted at `target`.
Status mount_new_filesystem(const std::string& type, const std::string& source,
                            const std::string& target, std::string_view data, unsigned long flags,
                            const std::string& noun) {
  std::string what = fmt::format("{} at \"{}\" failed", noun, target);
  UniqueFd fs(::fsopen(type.c_str(), FSOPEN_CLOEXEC));
  if (!fs.valid()) return errno_status(errno, what);
  if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", source.c_str(), 0) != 0) {
    int err = errno;
    return config_failure(err, fs.get(), what);
  }
  ROSETCTL_RETURN_IF_ERROR(configure(fs.get(), data, what));
  // The filesystem itself read-only or synchronous (mount(2)'s MS_RDONLY and MS_SYNCHRONOUS
  // on a new mount), beside the mount's own flags below.
  if ((flags & MS_RDONLY) && ::fsconfig(fs.get(), FSCONFIG_SET_FLAG, "ro", nullptr, 0) != 0) {
    int err = errno;
    return config_failure(err, fs.get(), what);
  }
  if ((flags & MS_SYNCHRONOUS) &&
      ::fsconfig(fs.get(), FSCONFIG_SET_FLAG, "sync", nullptr, 0) != 0) {
    int err = errno;
    return config_failure(err, fs.get(), what);
  }
  if (::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    int err = errno;
    return config_failure(err, fs.get(), what);
  }
  UniqueFd mount(::fsmount(fs.get(), FSMOUNT_CLOEXEC, mount_attributes(flags)));
  if (!mount.valid()) return errno_status(errno, what);
  auto point = PinnedPath::open(target, "mount point");
  if (!point) return point.status().with_context(what);
  return attach_mount(mount.get(), *point, false, noun);
}

}  // namespace

Status mount_device(const std::string& device, const std::string& target, std::string_view fs_type,
                    const MountOptions& options, const std::string& data) {
  unsigned long flags = options.flags | (options.read_only ? MS_RDONLY : 0);
  std::string type(fs_type);
  return mount_new_filesystem(type, device, target, data, flags,
                              fmt::format("mount of the {} filesystem on \"{}\"", type, device));
}

Status mount_tmpfs(const std::string& target, const std::string& data, unsigned long flags) {
  return mount_new_filesystem("tmpfs", "rosetctl", target, data, flags, "mount of a tmpfs");
}

}  // namespace rosetctl
