// Path helpers for NodeStage/NodePublish.
#include "daemon/node_paths.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "core/validate.h"

namespace rosetctl {

Expected<std::string> canonical_mount_path(std::string_view path, std::string_view field) {
  auto normal = normalize_absolute_path(path, field);
  if (!normal) return normal.status();
  if (*normal == "/") return error(Code::kInvalidArgument, "{} must not be \"/\"", field);
  std::size_t slash = normal->rfind('/');
  std::string parent = slash == 0 ? "/" : normal->substr(0, slash);
  std::string base = normal->substr(slash + 1);

  char resolved[PATH_MAX];
  if (::realpath(parent.c_str(), resolved) == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return error(Code::kInvalidArgument, "{} \"{}\": parent directory \"{}\" does not exist",
                   field, *normal, parent);
    }
    return errno_status(errno,
                        fmt::format("{} \"{}\": cannot resolve \"{}\"", field, *normal, parent));
  }
  std::string canonical =
      std::string(resolved) == "/" ? "/" + base : std::string(resolved) + "/" + base;
  struct stat st;
  if (::lstat(canonical.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return error(Code::kInvalidArgument,
                 "{} \"{}\" is a symbolic link; give the real path so the mount lands there", field,
                 *normal);
  }
  return canonical;
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
