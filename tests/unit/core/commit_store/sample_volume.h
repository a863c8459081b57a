// A directory with one of everything a volume can hold, for commit/restore/clone tests.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "unit/scratch_dir.h"

namespace rosetctl::testing {

inline void set_mtime(const std::string& path, time_t seconds, long nanos) {
  struct timespec times[2] = {{seconds, nanos}, {seconds, nanos}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

// Fills `root` (an existing directory).
inline void fill_sample_volume(const std::string& root) {
  write_file(root + "/plain.txt", "hello\n");
  write_file(root + "/empty", "");
  make_dir(root + "/empty dir");
  make_dir(root + "/nested");
  make_dir(root + "/nested/deeper", 0700);
  write_file(root + "/nested/deeper/name with spaces\nand a newline", "odd name");
  write_file(root + "/nested/setuid", "#!/bin/sh\n");
  REQUIRE(::chmod((root + "/nested/setuid").c_str(), 04755) == 0);
  REQUIRE(::symlink("../plain.txt", (root + "/nested/link").c_str()) == 0);
  REQUIRE(::symlink("/does/not/exist", (root + "/dangling").c_str()) == 0);
  REQUIRE(::link((root + "/plain.txt").c_str(), (root + "/zz-hardlink").c_str()) == 0);
  REQUIRE(::mkfifo((root + "/fifo").c_str(), 0640) == 0);
  REQUIRE(::setxattr((root + "/plain.txt").c_str(), "user.checkpoint", "epoch=3", 7, 0) == 0);
  REQUIRE(::setxattr((root + "/empty dir").c_str(), "user.empty", "", 0, 0) == 0);
  {
    std::ofstream sparse(root + "/sparse.bin", std::ios::binary);
    sparse.seekp(8 << 20);
    sparse << "tail";
  }
  if (::geteuid() == 0) {
    REQUIRE(::lchown((root + "/nested/deeper").c_str(), 1234, 5678) == 0);
    REQUIRE(::lchown((root + "/nested/link").c_str(), 42, 43) == 0);
  }
  set_mtime(root + "/plain.txt", 1'600'000'000, 123'456'789);
  set_mtime(root + "/nested/link", 1'500'000'000, 1);
  set_mtime(root + "/nested/deeper", 1'400'000'000, 2);
  set_mtime(root + "/empty dir", 1'300'000'000, 3);
}

}  // namespace rosetctl::testing
