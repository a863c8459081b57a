// remove_tree: openat/unlinkat recursion, one device, no symlink following.
#include "core/remove_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "core/directory_listing.h"

namespace rosetctl {
namespace {

// Identity of the mount a path belongs to: a bind mount of the same filesystem keeps st_dev,
// so the mount id (statx STATX_MNT_ID) is what tells a mount point apart.
struct Where {
  uint64_t mount_id = 0;
  bool is_dir = false;
};

Status where_is(int dir_fd, const char* name, const std::string& shown, Where* out) {
  struct statx stx;
  if (::statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH, STATX_TYPE | STATX_MNT_ID, &stx) !=
      0) {
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", shown));
  }
  out->mount_id = stx.stx_mnt_id;
  out->is_dir = S_ISDIR(stx.stx_mode);
  return Status::ok();
}

// Empties the directory open at `dir_fd` (which belongs to mount `mount_id`); `shown` is its
// path for messages.
Status empty_directory(int dir_fd, uint64_t mount_id, const std::string& shown) {
  auto names = list_directory_at(dir_fd, shown);
  if (!names) return names.status();

  for (const std::string& name : *names) {
    std::string child = shown + "/" + name;
    Where where;
    if (Status status = where_is(dir_fd, name.c_str(), child, &where); !status) {
      if (status.code() == Code::kNotFound) continue;
      return status;
    }
    if (where.is_dir) {
      if (where.mount_id != mount_id) {
        return error(Code::kFailedPrecondition,
                     "\"{}\" is a mount point; unmount it before removing \"{}\"", child, shown);
      }
      int child_fd =
          ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child_fd < 0) return errno_status(errno, fmt::format("cannot open \"{}\"", child));
      Status status = empty_directory(child_fd, mount_id, child);
      ::close(child_fd);
      ROSETCTL_RETURN_IF_ERROR(status);
      if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return errno_status(errno, fmt::format("cannot remove \"{}\"", child));
      }
    } else if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return errno_status(errno, fmt::format("cannot remove \"{}\"", child));
    }
  }
  return Status::ok();
}

}  // namespace

Status remove_tree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", path));
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
    }
    return Status::ok();
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open \"{}\"", path));
  Where where;
  Status status = where_is(fd, "", path, &where);
  if (status) status = empty_directory(fd, where.mount_id, path);
  ::close(fd);
  ROSETCTL_RETURN_IF_ERROR(status);
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
    if (errno == EBUSY) {
      return error(Code::kFailedPrecondition, "\"{}\" is a mount point; unmount it first", path);
    }
    return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
  }
  return Status::ok();
}

}  // namespace rosetctl
