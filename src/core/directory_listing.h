// DirectoryListing: the names in one directory, read with readdir through a stream that closes
// itself, and the errors of opening and of reading reported rather than ending the list early.
#pragma once

#include <dirent.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

class DirectoryListing {
 public:
  // The directory at `path`. A missing directory is NOT_FOUND (errno_status's mapping), so a
  // caller to whom that means "nothing listed" can say so.
  static Expected<DirectoryListing> open(const std::string& path);
  // The directory open at `dir_fd` (O_PATH is enough), through a descriptor of its own: the
  // listing neither moves `dir_fd`'s offset nor closes it. `shown` names it in errors.
  static Expected<DirectoryListing> open_at(int dir_fd, std::string shown);

  // The next name other than "." and ".."; nullopt at the end. The view lives until the next
  // call. An error of readdir is an error, not the end.
  Expected<std::optional<std::string_view>> next();

 private:
  struct Closer {
    void operator()(DIR* dir) const { ::closedir(dir); }
  };
  DirectoryListing(DIR* dir, std::string shown) : dir_(dir), shown_(std::move(shown)) {}

  std::unique_ptr<DIR, Closer> dir_;
  std::string shown_;
};

// Every name in the directory at `path` (or open at `dir_fd`) but "." and "..", in readdir's
// order.
Expected<std::vector<std::string>> list_directory(const std::string& path);
Expected<std::vector<std::string>> list_directory_at(int dir_fd, const std::string& shown);

}  // namespace rosetctl
