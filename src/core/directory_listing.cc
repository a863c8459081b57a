// Listing a directory (directory_listing.h).
#include "core/directory_listing.h"

#include <fcntl.h>

#include <cerrno>
#include <utility>

#include "core/unique_fd.h"

namespace rosetctl {
namespace {

Expected<std::vector<std::string>> read_all(Expected<DirectoryListing> listing) {
  if (!listing) return listing.status();
  std::vector<std::string> names;
  for (;;) {
    Expected<std::optional<std::string_view>> name = listing->next();
    if (!name) return name.status();
    if (!name->has_value()) return names;
    names.emplace_back(**name);
  }
}

}  // namespace

Expected<DirectoryListing> DirectoryListing::open(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return errno_status(errno, fmt::format("cannot read \"{}\"", path));
  return DirectoryListing(dir, path);
}

Expected<DirectoryListing> DirectoryListing::open_at(int dir_fd, std::string shown) {
  // A fresh open description: a dup would share (and move) dir_fd's offset.
  UniqueFd fd(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot read \"{}\"", shown));
  DIR* dir = ::fdopendir(fd.get());
  if (dir == nullptr) return errno_status(errno, fmt::format("cannot read \"{}\"", shown));
  fd.release();  // the stream owns it now
  return DirectoryListing(dir, std::move(shown));
}

Expected<std::optional<std::string_view>> DirectoryListing::next() {
  for (;;) {
    // readdir returns null both at the end and on an error; only errno tells them apart, and
    // only when it was cleared before this very call.
    errno = 0;
    const dirent* entry = ::readdir(dir_.get());
    if (entry == nullptr) {
      if (errno != 0) return errno_status(errno, fmt::format("cannot read \"{}\"", shown_));
      return std::optional<std::string_view>();
    }
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") return std::optional<std::string_view>(name);
  }
}

Expected<std::vector<std::string>> list_directory(const std::string& path) {
  return read_all(DirectoryListing::open(path));
}

Expected<std::vector<std::string>> list_directory_at(int dir_fd, const std::string& shown) {
  return read_all(DirectoryListing::open_at(dir_fd, shown));
}

}  // namespace rosetctl
