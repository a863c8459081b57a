// FIFREEZE / FITHAW through a descriptor of the mount point (see fs_freeze.h).
#include "core/fs_freeze.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#include <cerrno>

#include "core/log.h"

namespace rosetctl {
namespace {

Expected<UniqueFd> open_mount_point(const std::string& mount_point) {
  UniqueFd fd(::open(mount_point.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open \"{}\"", mount_point));
  return fd;
}

}  // namespace

Expected<FrozenFilesystem> FrozenFilesystem::freeze(const std::string& mount_point) {
  auto fd = open_mount_point(mount_point);
  if (!fd) return fd.status();
  if (::ioctl(fd->get(), FIFREEZE, 0) != 0) {
    if (errno == EBUSY) {
      return error(Code::kAborted,
                   "the filesystem at \"{}\" is frozen already (by fsfreeze, or by a process "
                   "that died while copying it); thaw it with `fsfreeze -u {}` and retry",
                   mount_point, mount_point);
    }
    return errno_status(errno, fmt::format("cannot freeze the filesystem at \"{}\"", mount_point));
  }
  return FrozenFilesystem(std::move(*fd), mount_point);
}

Status FrozenFilesystem::thaw() {
  if (!fd_.valid()) return Status::ok();
  UniqueFd fd = std::move(fd_);
  if (::ioctl(fd.get(), FITHAW, 0) != 0 && errno != EINVAL) {  // EINVAL: not frozen any more
    return errno_status(errno, fmt::format("cannot thaw the filesystem at \"{}\"", mount_point_));
  }
  return Status::ok();
}

FrozenFilesystem::~FrozenFilesystem() {
  if (Status thawed = thaw(); !thawed) {
    spdlog::error("{}: writers to it stay blocked until it is thawed (`fsfreeze -u {}`)",
                  thawed.message(), mount_point_);
  }
}

Expected<bool> thaw_filesystem(const std::string& mount_point) {
  auto fd = open_mount_point(mount_point);
  if (!fd) return fd.status();
  if (::ioctl(fd->get(), FITHAW, 0) == 0) return true;
  if (errno == EINVAL) return false;
  return errno_status(errno, fmt::format("cannot thaw the filesystem at \"{}\"", mount_point));
}

}  // namespace rosetctl
