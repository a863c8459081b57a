// Path helpers for NodeStage/NodePublish.
#include "daemon/node_paths.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "core/mount_point.h"
#include "core/real_path.h"
#include "core/validate.h"

namespace rosetctl {

Expected<std::string> canonical_mount_path(std::string_view path, std::string_view field) {
  auto normal = normalize_absolute_path(path, field);
  if (!normal) return normal.status();
  if (*normal == "/") return error(Code::kInvalidArgument, "{} must not be \"/\"", field);
  std::size_t slash = normal->rfind('/');
  std::string parent = slash == 0 ? "/" : normal->substr(0, slash);
  std::string base = normal->substr(slash + 1);

  std::optional<std::string> resolved = real_directory_path(parent);
  if (!resolved) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return error(Code::kInvalidArgument, "{} \"{}\": parent directory \"{}\" does not exist",
                   field, *normal, parent);
    }
    return errno_status(errno,
                        fmt::format("{} \"{}\": cannot resolve \"{}\"", field, *normal, parent));
  }
  std::string canonical = *resolved == "/" ? "/" + base : *resolved + "/" + base;
  struct stat st;
  if (::lstat(canonical.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return error(Code::kInvalidArgument,
                 "{} \"{}\" is a symbolic link; give the real path so the mount lands there", field,
                 *normal);
  }
  return canonical;
}

Expected<std::string> checked_mount_path(const StateLayout& layout, std::string_view path,
                                         std::string_view field,
                                         const std::string& allowed_inside_state) {
  auto canonical = canonical_mount_path(path, field);
  if (!canonical) return canonical.status();
  const std::string& root = layout.root;
  bool touches_state = path_is_within(*canonical, root) || path_is_within(root, *canonical);
  bool allowed =
      path_is_within(*canonical, allowed_inside_state) && *canonical != allowed_inside_state;
  if (touches_state && !allowed) {
    return error(Code::kInvalidArgument,
                 "{} \"{}\" is inside (or contains) the rosetctl state directory \"{}\"; pick a "
                 "path elsewhere",
                 field, *canonical, root);
  }
  return canonical;
}

namespace {

// rmdir of `at`'s name, already pinned: a directory left non-empty is kept.
Status remove_directory_at(const PinnedParent& at, const std::string& path) {
  if (::unlinkat(at.parent.fd(), at.name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT)
    return Status::ok();
  if (errno == ENOTEMPTY || errno == EEXIST) {
    // Files someone put there after our mount went away: theirs to keep.
    spdlog::warn("left directory \"{}\" in place: it is not empty", path);
    return Status::ok();
  }
  return errno_status(errno, fmt::format("cannot remove directory \"{}\"", path));
}

// A mount point the CSI call would create is fine; one that exists must be what
// check_mount_point asks for.
Status check_target(const std::string& target, bool file) {
  auto point = PinnedPath::open(target, "target_path");
  if (!point) return point.status().code() == Code::kNotFound ? Status::ok() : point.status();
  return check_mount_point(*point, file, "target_path");
}

}  // namespace

Status check_publish_target(const std::string& target) {
  return check_target(target, false);
}

Status check_block_target(const std::string& target) {
  return check_target(target, true);
}

Expected<bool> ensure_file(const std::string& path, std::string_view field) {
  auto at = pin_parent(path, field);
  if (!at) return at.status();
  int fd = ::openat(at->parent.fd(), at->name.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  if (errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create {} \"{}\"", field, path));
  }
  struct stat st;
  if (::fstatat(at->parent.fd(), at->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", field, path));
  }
  if (!S_ISREG(st.st_mode)) {
    return error(Code::kInvalidArgument,
                 "{} \"{}\" exists and is not a regular file; a block volume needs a file", field,
                 path);
  }
  return false;
}

Status remove_target(const std::string& path) {
  auto at = pin_parent(path, "target_path");
  if (!at) return at.status().code() == Code::kNotFound ? Status::ok() : at.status();
  struct stat st;
  if (::fstatat(at->parent.fd(), at->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Status::ok();
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", path));
  }
  if (S_ISDIR(st.st_mode)) return remove_directory_at(*at, path);  // the parent pinned once
  // Only the empty file a block publication was bound onto: data someone wrote there since
  // the device was unbound stays.
  if (!S_ISREG(st.st_mode) || st.st_size != 0) {
    spdlog::warn("left \"{}\" in place: it is no longer the empty file rosetctl created", path);
    return Status::ok();
  }
  if (::unlinkat(at->parent.fd(), at->name.c_str(), 0) == 0 || errno == ENOENT) return Status::ok();
  return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
}

Expected<bool> ensure_directory(const std::string& path, std::string_view field) {
  auto at = pin_parent(path, field);
  if (!at) return at.status();
  if (::mkdirat(at->parent.fd(), at->name.c_str(), 0755) == 0) return true;
  if (errno != EEXIST)
    return errno_status(errno, fmt::format("cannot create {} \"{}\"", field, path));
  struct stat st;
  if (::fstatat(at->parent.fd(), at->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", field, path));
  }
  if (!S_ISDIR(st.st_mode)) {
    return error(Code::kInvalidArgument,
                 "{} \"{}\" exists and is not a directory; a mount volume needs a directory", field,
                 path);
  }
  return false;
}

Status remove_directory(const std::string& path) {
  auto at = pin_parent(path, "directory");
  if (!at) return at.status().code() == Code::kNotFound ? Status::ok() : at.status();
  return remove_directory_at(*at, path);
}

}  // namespace rosetctl
