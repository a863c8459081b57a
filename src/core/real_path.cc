// real_directory_path: open(O_PATH) + readlink of /proc/self/fd/N.
#include "core/real_path.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/unique_fd.h"

namespace rosetctl {
namespace {

// Absolute, without empty, "." or ".." components and without a trailing slash ("/" aside).
bool is_lexically_canonical(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  if (path == "/") return true;
  if (path.back() == '/') return false;
  for (std::size_t pos = 1; pos <= path.size();) {
    std::size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    std::string_view part = path.substr(pos, next - pos);
    if (part.empty() || part == "." || part == "..") return false;
    pos = next + 1;
  }
  return true;
}

enum class Plain { kYes, kMissing, kUnknown };

// Whether `path` opens as a directory without crossing a symlink: then it is its own real path,
// and the kernel need not be asked to name it. kMissing (errno set) where open(2) would fail
// the same way; kUnknown sends the caller the long way (a symlink on the way, no openat2).
Plain is_plain_directory(const std::string& path) {
  if (!is_lexically_canonical(path)) return Plain::kUnknown;
  struct open_how how = {};
  // Without O_NOFOLLOW: with O_PATH it would open a trailing symlink itself (ENOTDIR here);
  // RESOLVE_NO_SYMLINKS refuses it with ELOOP instead, which takes the long way.
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof(how));
  if (fd >= 0) {
    ::close(static_cast<int>(fd));
    return Plain::kYes;
  }
  // Every component before the failing one was a directory and no symlink: open(2) fails alike.
  return errno == ENOENT || errno == ENOTDIR ? Plain::kMissing : Plain::kUnknown;
}

}  // namespace

std::optional<std::string> real_directory_path(const std::string& path) {
  switch (is_plain_directory(path)) {
    case Plain::kYes:
      return path;
    case Plain::kMissing:
      return std::nullopt;  // errno from openat2
    case Plain::kUnknown:
      break;
  }
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
