// Test helpers for the commit store tests: a scratch directory removed at the end, and small
// file-writing shorthands.
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

}  // namespace rosetctl::testing
