// real_directory_path: open(O_PATH) + readlink of /proc/self/fd/N.
#include "core/real_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/unique_fd.h"

namespace rosetctl {

std::optional<std::string> real_directory_path(const std::string& path) {
  UniqueFd directory(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!directory.valid()) return std::nullopt;  // errno from open
  char link[32];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", directory.get());
  char resolved[PATH_MAX];
  ssize_t length = ::readlink(link, resolved, sizeof resolved);
  // Removed meanwhile the kernel appends " (deleted)"; an unreadable /proc gives an error: in
  // both cases realpath(3) answers for the path as it is now.
  constexpr std::string_view kDeleted = " (deleted)";
  if (length <= 0 || length >= static_cast<ssize_t>(sizeof resolved) || resolved[0] != '/' ||
      std::string_view(resolved, length).ends_with(kDeleted)) {
    directory.reset();
    if (::realpath(path.c_str(), resolved) == nullptr) return std::nullopt;
    return std::string(resolved);
  }
  return std::string(resolved, static_cast<size_t>(length));
}

}  // namespace rosetctl
