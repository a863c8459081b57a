// Unit test helpers: a scratch directory removed at the end of the test, and small
// file-writing shorthands.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace rosetctl::testing {

// A fresh directory under /tmp, removed with all it holds when the test ends. Its path is
// canonical (no symlink in it), as mountinfo and sysfs show paths. A test that mounts or
// attaches something in it undoes that in its own destructor, which runs first.
struct ScratchDir {
  std::string path;
  // `name` tells apart the directories of different tests: /tmp/rosetctl-<name>-XXXXXX.
  explicit ScratchDir(const std::string& name = "unit") {
    std::string pattern = "/tmp/rosetctl-" + name + "-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = std::filesystem::canonical(pattern).string();
  }
  ~ScratchDir() {
    if (kept_) return;
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string operator/(const std::string& name) const { return path + "/" + name; }

  // Leaves the directory in place: a mount the test could not undo is still in it, and removing
  // would delete through the mount. A person looks at it.
  void keep() { kept_ = true; }

 private:
  bool kept_ = false;
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
