// mount(2) of device filesystems and tmpfs.
#include "core/mount_filesystem.h"

#include <sys/mount.h>

#include <cerrno>

namespace rosetctl {

Status mount_device(const std::string& device, const std::string& target, std::string_view fs_type,
                    const MountOptions& options, const std::string& data) {
  unsigned long flags = options.flags | (options.read_only ? MS_RDONLY : 0);
  std::string type(fs_type);
  if (::mount(device.c_str(), target.c_str(), type.c_str(), flags,
              data.empty() ? nullptr : data.c_str()) != 0) {
    int err = errno;  // read before formatting, which may allocate
    return errno_status(err, fmt::format("mount of the {} filesystem on \"{}\" at \"{}\" failed",
                                         type, device, target));
  }
  return Status::ok();
}

Status mount_tmpfs(const std::string& target, const std::string& data, unsigned long flags) {
  if (::mount("rosetctl", target.c_str(), "tmpfs", flags, data.c_str()) != 0) {
    int err = errno;
    return errno_status(err, fmt::format("mount of a tmpfs at \"{}\" failed", target));
  }
  return Status::ok();
}

}  // namespace rosetctl
