// Pinned paths (openat2 without symlinks), attaching detached mounts to them and verifying,
// unique mount ids, unmounting through a pinned parent.
#include "core/mount_point.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2
#include <cstring>

#include "core/directory_listing.h"
#include "core/linux_mount_api.h"

namespace rosetctl {
namespace {

using linux_api::kStatxMountIdUnique;
using linux_api::kStatxMountRoot;

// openat2 without following any symlink, magic links included. EAGAIN: a rename raced the
// lookup, and the kernel asks us to try again.
int open_no_symlinks(int dir_fd, const std::string& path, int flags) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = -1;
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd = ::syscall(SYS_openat2, dir_fd, path.c_str(), &how, sizeof(how));
    if (fd >= 0 || errno != EAGAIN) break;
  }
  return static_cast<int>(fd);
}

Status open_failure(int err, const std::string& path, std::string_view field) {
  if (err == ELOOP) {
    return error(Code::kInvalidArgument,
                 "{} \"{}\": a component of it is a symbolic link (or was just replaced by one); "
                 "give a path without symlinks",
                 field, path);
  }
  if (err == ENOENT) return error(Code::kNotFound, "{} \"{}\" does not exist", field, path);
  return errno_status(err, fmt::format("cannot open {} \"{}\"", field, path));
}

// The unique id of the mount `fd` is on (and whether `fd` is its root). On kernels without
// unique ids the id is 0.
struct MountOfFd {
  MountId id = 0;
  bool root = false;
};

Expected<MountOfFd> mount_of(int dir_fd, const char* name, int extra_flags) {
  struct statx st = {};
  // DONT_SYNC: a FUSE or network mount answers from its cache instead of from its server.
  int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC | extra_flags;
  if (::statx(dir_fd, name, flags, kStatxMountIdUnique, &st) != 0) {
    int err = errno;
    if (err == ENOTCONN || err == ECONNABORTED || err == ESTALE || err == EIO) {
      return error(Code::kUnavailable, "the mount does not answer: {}", std::strerror(err));
    }
    return errno_status(err, "statx failed");
  }
  MountOfFd out;
  if (st.stx_mask & kStatxMountIdUnique) out.id = st.stx_mnt_id;
  if (st.stx_attributes_mask & kStatxMountRoot)
    out.root = (st.stx_attributes & kStatxMountRoot) != 0;
  return out;
}

Expected<bool> is_empty_directory(int fd, const std::string& path) {
  // getdents needs a real descriptor: open_at reopens the O_PATH one for reading, through
  // openat(fd, ".") so that it is the very same directory.
  auto listing = DirectoryListing::open_at(fd, path);
  if (!listing) return listing.status();
  auto first = listing->next();
  if (!first) return first.status();
  return !first->has_value();
}

}  // namespace

Expected<PinnedPath> PinnedPath::open(const std::string& path, std::string_view field) {
  if (path.empty() || path.front() != '/') {
    return error(Code::kInvalidArgument, "{} \"{}\" is not an absolute path", field, path);
  }
  int fd = open_no_symlinks(AT_FDCWD, path, O_PATH);
  if (fd < 0) return open_failure(errno, path, field);
  return PinnedPath(UniqueFd(fd), path);
}

Expected<PinnedPath> PinnedPath::open_in(const PinnedPath& parent, const std::string& name,
                                         std::string_view field) {
  std::string path = parent.path() == "/" ? "/" + name : parent.path() + "/" + name;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return error(Code::kInvalidArgument, "{} \"{}\" does not end in a plain name", field, path);
  }
  int fd = open_no_symlinks(parent.fd(), name, O_PATH);
  if (fd < 0) return open_failure(errno, path, field);
  return PinnedPath(UniqueFd(fd), std::move(path));
}

std::string PinnedPath::proc_path() const {
  return fmt::format("/proc/self/fd/{}", fd_.get());
}

Expected<std::optional<MountId>> mount_id_at(const std::string& path) {
  auto mount = mount_of(AT_FDCWD, path.c_str(), 0);
  if (!mount && mount.status().code() == Code::kNotFound) return std::optional<MountId>();
  if (!mount) return mount.status().with_context(fmt::format("\"{}\"", path));
  if (!mount->root) return std::optional<MountId>();
  return std::optional<MountId>(mount->id);
}

MountId mount_made_at(const std::string& path) {
  auto id = mount_id_at(path);
  return id && id->has_value() ? **id : 0;
}

Expected<PinnedParent> pin_parent(const std::string& given, std::string_view field) {
  std::string path = given;
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  size_t slash = path.rfind('/');
  if (path.empty() || path.front() != '/' || slash == std::string::npos || path == "/") {
    return error(Code::kInvalidArgument, "{} \"{}\" is not an absolute path to a file or directory",
                 field, given);
  }
  auto parent = PinnedPath::open(slash == 0 ? "/" : path.substr(0, slash), field);
  if (!parent) return parent.status();
  return PinnedParent{std::move(*parent), path.substr(slash + 1)};
}

Status check_mount_point(const PinnedPath& point, bool file, std::string_view field) {
  struct stat st;
  if (::fstat(point.fd(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", field, point.path()));
  }
  auto mount = mount_of(point.fd(), "", AT_EMPTY_PATH);
  if (!mount) return mount.status().with_context(fmt::format("{} \"{}\"", field, point.path()));
  if (mount->root) {
    return error(Code::kAlreadyExists, "{} \"{}\" already has another mount", field, point.path());
  }
  if (file) {
    if (!S_ISREG(st.st_mode)) {
      return error(
          Code::kInvalidArgument,
          "{} \"{}\" exists and is not a regular file; a block volume is bound onto a file", field,
          point.path());
    }
    if (st.st_size != 0) {
      return error(
          Code::kFailedPrecondition,
          "{} \"{}\" is a file with data; binding the device over it would hide its contents",
          field, point.path());
    }
    return Status::ok();
  }
  if (!S_ISDIR(st.st_mode)) {
    return error(Code::kInvalidArgument,
                 "{} \"{}\" exists and is not a directory; a mount volume needs a directory", field,
                 point.path());
  }
  auto empty = is_empty_directory(point.fd(), point.path());
  if (!empty) return empty.status().with_context(field);
  if (!*empty) {
    return error(Code::kFailedPrecondition,
                 "{} \"{}\" is not empty; mounting over it would hide its contents", field,
                 point.path());
  }
  return Status::ok();
}

Status attach_mount(int mount_fd, const PinnedPath& point, bool file, std::string_view what) {
  ROSETCTL_RETURN_IF_ERROR(check_mount_point(point, file, "mount point"));
  auto made = mount_of(mount_fd, "", AT_EMPTY_PATH);
  if (!made) return made.status().with_context(std::string(what));
  if (::move_mount(mount_fd, "", point.fd(), "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
    int err = errno;  // read before formatting, which may allocate
    return errno_status(err, fmt::format("{} on \"{}\" failed", what, point.path()));
  }
  // The path must show the new mount now. If it does not, the directory was renamed or the
  // path swapped between the lookup and the attach: the mount is not where a record would say.
  // A rename the kernel let through just before the attach (it checks for a mount point
  // before there was one, and does not wait for the attach) may still be finishing, and would
  // move the mount after this look. The rename holds the parent directory's lock until it has
  // finished: renaming the name onto itself takes that lock and changes nothing (EEXIST), so
  // after it the name shows where the mount really is, and any later rename finds a mount
  // point and is refused (EBUSY).
  auto at = pin_parent(point.path(), "mount point");
  bool in_place = false;
  if (at) {
    (void)::renameat2(at->parent.fd(), at->name.c_str(), at->parent.fd(), at->name.c_str(),
                      RENAME_NOREPLACE);
    auto shown = mount_of(at->parent.fd(), at->name.c_str(), 0);
    in_place = shown && shown->root && (made->id == 0 || shown->id == made->id);
  }
  if (in_place) return Status::ok();
  // Lazily: `mount_fd` still refers to it, so a plain unmount would find it busy. It has no
  // users and nothing mounted below it yet.
  (void)::umount2(fmt::format("/proc/self/fd/{}", mount_fd).c_str(), MNT_DETACH);
  return error(
      Code::kFailedPrecondition,
      "{} on \"{}\" was undone: the path changed while it was being mounted (renamed, or a "
      "symlink swapped in); nothing is mounted there",
      what, point.path());
}

bool unmount_pinned(const PinnedParent& at, int flags) {
  std::string path = fmt::format("{}/{}", at.parent.proc_path(), at.name);
  return ::umount2(path.c_str(), flags | UMOUNT_NOFOLLOW) == 0;
}

}  // namespace rosetctl
