// Path helpers for NodeStage/NodePublish.
#include "daemon/node_paths.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "core/mount_lookup.h"
#include "core/real_path.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

Status check_nothing_mounted(const std::string& target) {
  auto mounted = find_mount(target);
  if (!mounted) return mounted.status();
  if (mounted->has_value()) {
    return error(Code::kAlreadyExists, "target_path \"{}\" already has another mount", target);
  }
  return Status::ok();
}

}  // namespace

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

Status check_publish_target(const std::string& target) {
  ROSETCTL_RETURN_IF_ERROR(check_nothing_mounted(target));
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return errno_status(errno, fmt::format("cannot inspect target_path \"{}\"", target));
  }
  if (!S_ISDIR(st.st_mode)) {
    return error(
        Code::kInvalidArgument,
        "target_path \"{}\" exists and is not a directory; a mount volume needs a directory",
        target);
  }
  auto empty = directory_is_empty(target);
  if (!empty) return empty.status();
  if (!*empty) {
    return error(Code::kFailedPrecondition,
                 "target_path \"{}\" is not empty; mounting over it would hide its contents",
                 target);
  }
  return Status::ok();
}

Status check_block_target(const std::string& target) {
  ROSETCTL_RETURN_IF_ERROR(check_nothing_mounted(target));
  struct stat st;
  if (::lstat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return errno_status(errno, fmt::format("cannot inspect target_path \"{}\"", target));
  }
  if (!S_ISREG(st.st_mode)) {
    return error(Code::kInvalidArgument,
                 "target_path \"{}\" exists and is not a regular file; a block volume is bound "
                 "onto a file",
                 target);
  }
  if (st.st_size != 0) {
    return error(Code::kFailedPrecondition,
                 "target_path \"{}\" is a file with data; binding the device over it would hide "
                 "its contents",
                 target);
  }
  return Status::ok();
}

Expected<bool> ensure_file(const std::string& path, std::string_view field) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  if (errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create {} \"{}\"", field, path));
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
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
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", path));
  }
  if (S_ISDIR(st.st_mode)) return remove_directory(path);
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return Status::ok();
  return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
}

Expected<bool> ensure_directory(const std::string& path, std::string_view field) {
  if (::mkdir(path.c_str(), 0755) == 0) return true;
  if (errno != EEXIST)
    return errno_status(errno, fmt::format("cannot create {} \"{}\"", field, path));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", field, path));
  }
  if (!S_ISDIR(st.st_mode)) {
    return error(Code::kInvalidArgument,
                 "{} \"{}\" exists and is not a directory; a mount volume needs a directory", field,
                 path);
  }
  return false;
}

Expected<bool> directory_is_empty(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return errno_status(errno, fmt::format("cannot read \"{}\"", path));
  bool empty = true;
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(dir);
  return empty;
}

Status remove_directory(const std::string& path) {
  if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return Status::ok();
  return errno_status(errno, fmt::format("cannot remove directory \"{}\"", path));
}

}  // namespace rosetctl
