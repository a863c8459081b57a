// Opening and reading a secret file without trusting what the path names.
#include "core/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "core/random_id.h"
#include "core/secret_volume_file.h"
#include "core/unique_fd.h"

namespace rosetctl {
namespace {

std::string_view kind_of(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFLNK:
      return "a symbolic link";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a named pipe (FIFO)";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    default:
      return "not a regular file";
  }
}

Status not_a_regular_file(std::string_view what, const std::string& path, mode_t mode) {
  bool link = S_ISLNK(mode);
  return error(Code::kPermissionDenied, "{} \"{}\" is {}, not a regular file; {}", what, path,
               kind_of(mode),
               link ? "name the file itself (a link could point the mode check elsewhere)"
                    : "give a regular file of mode 0600");
}

// "its group can read it and other users can write it" for the bits of `mode` that are wrong.
std::string describe_access(mode_t mode) {
  auto rights = [](bool read, bool write, bool execute) {
    std::vector<std::string_view> words;
    if (read) words.push_back("read");
    if (write) words.push_back("write");
    if (execute) words.push_back("execute");
    std::string out;
    for (size_t i = 0; i < words.size(); ++i) {
      out += i == 0 ? "" : i + 1 == words.size() ? " and " : ", ";
      out += words[i];
    }
    return out;
  };
  std::string group = rights(mode & S_IRGRP, mode & S_IWGRP, mode & S_IXGRP);
  std::string others = rights(mode & S_IROTH, mode & S_IWOTH, mode & S_IXOTH);
  std::string out;
  if (!group.empty()) out = fmt::format("its group can {} it", group);
  if (!others.empty()) {
    out += fmt::format("{}other users can {} it", out.empty() ? "" : " and ", others);
  }
  return out;
}

}  // namespace

Expected<std::string> read_private_file(const std::string& path, std::string_view what,
                                        size_t max_bytes) {
  // O_NOFOLLOW: the mode checked below must be the file's own, not a symlink's target's.
  // O_NONBLOCK: a FIFO opens at once instead of waiting for a writer (and is refused below).
  // O_NOCTTY: a terminal named by mistake does not become ours.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    int err = errno;
    // What the path names, only to say so: a symlink (ELOOP) or a socket (ENXIO) cannot be
    // opened this way at all. A symlink is followed only when it is a Kubernetes Secret
    // volume's own (core/secret_volume_file.h); the mode below is then the file's.
    struct stat named;
    if (::lstat(path.c_str(), &named) == 0 && S_ISLNK(named.st_mode)) {
      auto opened = open_secret_volume_file(path, what);
      if (!opened) return opened.status();
      fd = std::move(*opened);
    } else if (::lstat(path.c_str(), &named) == 0 && !S_ISREG(named.st_mode)) {
      return not_a_regular_file(what, path, named.st_mode);
    } else {
      return errno_status(err, fmt::format("cannot open {} \"{}\"", what, path));
    }
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", what, path));
  }
  if (!S_ISREG(st.st_mode)) return not_a_regular_file(what, path, st.st_mode);
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return error(Code::kPermissionDenied, "{} \"{}\" has mode {:04o}: {}; chmod 600 it", what, path,
                 st.st_mode & 07777, describe_access(st.st_mode));
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

Status write_private_file(const std::string& path, std::string_view content) {
  std::string temporary = fmt::format("{}.{}.tmp", path, random_hex(4));
  UniqueFd fd(
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot create \"{}\"", temporary));
  bool written =
      ::write(fd.get(), content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
      ::fchmod(fd.get(), 0600) == 0 && ::fsync(fd.get()) == 0;
  int err = errno;
  fd.reset();
  if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
    if (written) err = errno;
    ::unlink(temporary.c_str());
    return errno_status(err, fmt::format("cannot write \"{}\"", path));
  }
  return Status::ok();
}

}  // namespace rosetctl
