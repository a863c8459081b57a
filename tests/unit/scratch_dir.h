// Test helpers for the commit store tests: a scratch directory removed at the end, small
// file-writing shorthands, and damage to a stored object.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace rosetctl::testing {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    char pattern[] = "/tmp/rosetctl-store-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void make_dir(const std::string& path, mode_t mode = 0755) {
  REQUIRE(::mkdir(path.c_str(), mode) == 0);
}

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
