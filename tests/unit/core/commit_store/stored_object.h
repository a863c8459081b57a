// Commit store test helpers: where an object is stored, and damage done to it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "unit/scratch_dir.h"

namespace rosetctl::testing {

// Overwrites 4 bytes in the middle of `path` (at least 8 bytes long), keeping its size: what a
// stray write or bit rot does to a stored object.
inline void damage_middle(const std::string& path) {
  REQUIRE(::chmod(path.c_str(), 0644) == 0);  // objects are stored read-only
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  struct stat st;
  REQUIRE(::fstat(fd, &st) == 0);
  REQUIRE(st.st_size >= 8);
  CHECK(::pwrite(fd, "\xde\xad\xbe\xef", 4, st.st_size / 2) == 4);
  ::close(fd);
}

// Where the store under `store_root` keeps object `id` of `kind` ("blobs", "trees").
inline std::string object_path(const std::string& store_root, const std::string& kind,
                               const std::string& id) {
  return store_root + "/" + kind + "/" + id.substr(0, 2) + "/" + id;
}

}  // namespace rosetctl::testing
