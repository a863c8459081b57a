#include "core/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/unique_fd.h"

namespace rosetctl {

Expected<std::string> read_private_file(const std::string& path, std::string_view what,
                                        size_t max_bytes) {
  // O_NOFOLLOW: the mode checked below must be the file's own, not a symlink's target's.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open {} \"{}\"", what, path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", what, path));
  }
  if (!S_ISREG(st.st_mode)) {
    return error(Code::kInvalidArgument, "{} \"{}\" is not a regular file", what, path);
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return error(Code::kPermissionDenied,
                 "{} \"{}\" has mode {:04o}: other users could read it; chmod 600 it", what, path,
                 st.st_mode & 07777);
  }
  std::string content;
  char buffer[4096];
  while (content.size() <= max_bytes) {
    ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_status(errno, fmt::format("cannot read {} \"{}\"", what, path));
    if (got == 0) return content;
    content.append(buffer, static_cast<size_t>(got));
  }
  return error(Code::kInvalidArgument, "{} \"{}\" is larger than {} bytes", what, path, max_bytes);
}

}  // namespace rosetctl
