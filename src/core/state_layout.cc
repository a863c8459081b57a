// Creation of the state directory tree.
#include "core/state_layout.h"

#include <sys/stat.h>

#include <cerrno>

namespace rosetctl {
namespace {

Status make_dir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return Status::ok();
  return errno_status(errno, fmt::format("cannot create directory \"{}\"", path));
}

// mkdir -p for the root itself, which may be several levels deep (tests, --state-dir).
Status make_parents(const std::string& path, mode_t mode) {
  for (std::size_t pos = path.find('/', 1); pos != std::string::npos;
       pos = path.find('/', pos + 1)) {
    ROSETCTL_RETURN_IF_ERROR(make_dir(path.substr(0, pos), 0755));
  }
  return make_dir(path, mode);
}

}  // namespace

Status StateLayout::ensure_directories() const {
  ROSETCTL_RETURN_IF_ERROR(make_parents(root, 0700));
  ROSETCTL_RETURN_IF_ERROR(make_dir(volumes_dir(), 0700));
  ROSETCTL_RETURN_IF_ERROR(make_dir(trash_dir(), 0700));
  ROSETCTL_RETURN_IF_ERROR(make_dir(staging_dir(), 0700));
  return make_dir(mounts_dir(), 0755);
}

}  // namespace rosetctl
