// Moving file content around without losing holes: hashing, hash-while-copying, reflink
// clones (FICLONE) and in-kernel copies (copy_file_range) of the data segments only.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace rosetctl {

// What identifies one version of a file's content: if any of these moved, it was written.
struct FileVersion {
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;

  static FileVersion of(const struct stat& st);
  bool operator==(const FileVersion&) const = default;
};

int64_t mtime_ns_of(const struct stat& st);

// A reusable read buffer: one per worker thread.
using ContentBuffer = std::vector<char>;
inline constexpr std::size_t kContentBufferBytes = 1 << 20;

// The result of reading a file while hashing it.
struct HashedContent {
  std::string sha256;       // of all `size` logical bytes, holes read as zeros
  bool short_read = false;  // the file ended before `size`: it shrank while being read
};

// Reads the first `size` bytes of `src_fd` (skipping holes via SEEK_DATA/SEEK_HOLE) and hashes
// them. With `dst_fd` >= 0, also writes the data at the same offsets there and sets its length
// to `size`, so holes stay holes. `what` names the source in errors.
Expected<HashedContent> hash_content(int src_fd, int64_t size, int dst_fd, ContentBuffer& buffer,
                                     const std::string& what);

// Shares `src_fd`'s extents with `dst_fd` (FICLONE). False when the filesystem cannot (no
// reflink support, different filesystems): the caller copies instead.
Expected<bool> clone_content(int src_fd, int dst_fd, const std::string& what);

// Copies the first `size` bytes in the kernel (copy_file_range), data segments only, and sets
// the destination's length to `size`.
Status copy_content(int src_fd, int dst_fd, int64_t size, const std::string& what);

// Makes the empty `dst_fd` a copy of the first `size` bytes of `src_fd`: a clone (FICLONE)
// where the filesystem can, else copy_content. True when it was a clone.
Expected<bool> clone_or_copy(int src_fd, int dst_fd, int64_t size, const std::string& what);

}  // namespace rosetctl
