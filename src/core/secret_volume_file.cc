// Following kubelet's atomic-writer links to a Secret's key, and no other link.
#include "core/secret_volume_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

namespace rosetctl {
namespace {

constexpr std::string_view kData = "..data";
// kubelet swaps ..data to a new directory and then removes the old one; a read that lands
// between the two finds the old one gone and looks again.
constexpr int kAttempts = 3;

struct Split {
  std::string dir;
  std::string name;
};

Split split(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::optional<std::string> link_target(int dir_fd, const std::string& name) {
  char buffer[PATH_MAX];
  ssize_t got = ::readlinkat(dir_fd, name.c_str(), buffer, sizeof buffer);
  if (got < 0 || static_cast<size_t>(got) >= sizeof buffer) return std::nullopt;
  return std::string(buffer, static_cast<size_t>(got));
}

class Layout {
 public:
  Layout(const std::string& path, std::string_view what) : path_(path), what_(what) {}

  Status refused(std::string_view why) const {
    return error(Code::kPermissionDenied,
                 "{} \"{}\" is a symbolic link that {}; only a Kubernetes Secret volume's own "
                 "links are followed (KEY -> ..data/KEY, ..data -> ..TIMESTAMP, in one directory, "
                 "one owner): name the file itself",
                 what_, path_, why);
  }

  // The owner every part must have: root or this process's user.
  Status check_owner(const struct stat& st, std::string_view part) {
    if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
      return refused(
          fmt::format("leads to {} owned by user {} (neither root nor this process's "
                      "user {})",
                      part, st.st_uid, ::geteuid()));
    }
    if (owner_ && *owner_ != st.st_uid) {
      return refused(fmt::format("leads to {} owned by user {}, not by {}, the owner of the rest",
                                 part, st.st_uid, *owner_));
    }
    owner_ = st.st_uid;
    return Status::ok();
  }

  Status check_link(int dir_fd, const std::string& name, std::string_view part) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", what_, path_));
    }
    if (!S_ISLNK(st.st_mode)) return refused(fmt::format("leads to {}, which is not a link", part));
    return check_owner(st, part);
  }

  // The key's file, opened; nullopt when kubelet removed the directory under us (look again).
  Expected<std::optional<UniqueFd>> open_once() {
    owner_.reset();
    auto [dir, key] = split(path_);
    if (key.empty() || key.starts_with("..")) return refused("is not a key's name");
    UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir_fd.valid()) {
      return errno_status(errno,
                          fmt::format("cannot open the directory of {} \"{}\"", what_, path_));
    }
    // The directory's owner alone may change its links (kubelet's: root), else another user
    // could swap ..data between our check of its owner and our read of its target.
    struct stat dir_st {};
    if (::fstat(dir_fd.get(), &dir_st) != 0) {
      return errno_status(errno,
                          fmt::format("cannot read the directory of {} \"{}\"", what_, path_));
    }
    if ((dir_st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return refused(fmt::format("is in a directory other users may change (mode {:04o})",
                                 dir_st.st_mode & 07777));
    }
    ROSETCTL_RETURN_IF_ERROR(check_owner(dir_st, "its directory"));
    ROSETCTL_RETURN_IF_ERROR(check_link(dir_fd.get(), key, "the key's link"));
    auto key_target = link_target(dir_fd.get(), key);
    std::string wanted = fmt::format("{}/{}", kData, key);
    if (!key_target || *key_target != wanted) {
      return refused(fmt::format("points at \"{}\", not \"{}\"", key_target.value_or("?"), wanted));
    }
    std::string data(kData);
    ROSETCTL_RETURN_IF_ERROR(check_link(dir_fd.get(), data, "..data"));
    auto data_target = link_target(dir_fd.get(), data);
    if (!data_target) return std::optional<UniqueFd>();  // swapped or removed: look again
    const std::string& stamp = *data_target;
    if (!stamp.starts_with("..") || stamp.size() <= 2 || stamp == kData ||
        stamp.find('/') != std::string::npos) {
      return refused(
          fmt::format("goes through ..data, which points at \"{}\", not a "
                      "..TIMESTAMP directory beside it",
                      stamp));
    }
    UniqueFd stamp_fd(
        ::openat(dir_fd.get(), stamp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!stamp_fd.valid()) {
      if (errno == ENOENT) return std::optional<UniqueFd>();
      if (errno == ELOOP || errno == ENOTDIR) {
        return refused(fmt::format("goes through \"{}\", which is not a directory", stamp));
      }
      return errno_status(errno,
                          fmt::format("cannot open \"{}\" of {} \"{}\"", stamp, what_, path_));
    }
    struct stat stamp_st;
    if (::fstat(stamp_fd.get(), &stamp_st) != 0) {
      return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", what_, path_));
    }
    ROSETCTL_RETURN_IF_ERROR(check_owner(stamp_st, fmt::format("the directory \"{}\"", stamp)));
    UniqueFd file(::openat(stamp_fd.get(), key.c_str(),
                           O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
    if (!file.valid()) {
      if (errno == ELOOP)
        return refused(fmt::format("leads to \"{}/{}\", another link", stamp, key));
      return errno_status(errno, fmt::format("cannot open {} \"{}\"", what_, path_));
    }
    struct stat file_st;
    if (::fstat(file.get(), &file_st) != 0) {
      return errno_status(errno, fmt::format("cannot inspect {} \"{}\"", what_, path_));
    }
    if (!S_ISREG(file_st.st_mode)) {
      return refused(fmt::format("leads to \"{}/{}\", which is not a regular file", stamp, key));
    }
    ROSETCTL_RETURN_IF_ERROR(check_owner(file_st, "the file"));
    return std::optional<UniqueFd>(std::move(file));
  }

 private:
  const std::string& path_;
  std::string_view what_;
  std::optional<uid_t> owner_;
};

}  // namespace

Expected<UniqueFd> open_secret_volume_file(const std::string& path, std::string_view what) {
  Layout layout(path, what);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto opened = layout.open_once();
    if (!opened) return opened.status();
    if (*opened) return std::move(**opened);
  }
  return error(Code::kUnavailable,
               "{} \"{}\": its Secret volume changed {} times while it was read; try again", what,
               path, kAttempts);
}

}  // namespace rosetctl
