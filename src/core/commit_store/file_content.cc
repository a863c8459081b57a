// Content copying and hashing over data segments.
#include "core/commit_store/file_content.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/call_scope.h"
#include "core/commit_store/sha256.h"

namespace rosetctl {
namespace {

int64_t ns_of(const struct timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The next data segment [start, end) at or after `offset`, clipped to `size`. start == size
// when only a hole is left. Filesystems without SEEK_DATA report everything as data.
Status next_data_segment(int fd, int64_t offset, int64_t size, int64_t* start, int64_t* end,
                         const std::string& what) {
  off_t data = ::lseek(fd, offset, SEEK_DATA);
  if (data < 0) {
    if (errno == ENXIO) {  // no data after offset
      *start = *end = size;
      return Status::ok();
    }
    if (errno != EINVAL) return errno_status(errno, fmt::format("cannot seek in \"{}\"", what));
    data = offset;
  }
  *start = std::min<int64_t>(data, size);
  off_t hole = ::lseek(fd, *start, SEEK_HOLE);
  *end = hole < 0 ? size : std::min<int64_t>(hole, size);
  if (*end <= *start && *start < size) *end = size;  // defensive: never loop without progress
  return Status::ok();
}

// Larger buffered writes were several times slower, often, on the benchmark machine (Linux
// 6.18, ext4 with large page-cache folios, a VM): a restore of 512 MiB spent 2.0-2.4 s of system
// time copying into the page cache with 128 KiB or 1 MiB writes and 0.42-0.49 s with 64 KiB;
// a first commit 2.1-2.5 s against 0.5 s (bench/README.md, "Restores check what they copy").
constexpr std::size_t kWriteChunkBytes = 64 << 10;
// The most one copy_file_range is asked for: how much is copied between two looks at the call.
constexpr int64_t kCopyPieceBytes = 64 << 20;

Status write_all(int fd, const char* data, std::size_t size, int64_t offset,
                 const std::string& what) {
  while (size > 0) {
    ssize_t written = ::pwrite(fd, data, std::min(size, kWriteChunkBytes), offset);
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, fmt::format("cannot write the copy of \"{}\"", what));
    }
    data += written;
    size -= static_cast<std::size_t>(written);
    offset += written;
  }
  return Status::ok();
}

Status copy_range_by_read(int src_fd, int dst_fd, int64_t offset, int64_t end,
                          const std::string& what) {
  std::vector<char> buffer(kContentBufferBytes);
  while (offset < end) {
    ROSETCTL_RETURN_IF_ERROR(check_current_call());
    std::size_t want = static_cast<std::size_t>(std::min<int64_t>(end - offset, buffer.size()));
    ssize_t got = ::pread(src_fd, buffer.data(), want, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_status(errno, fmt::format("cannot read \"{}\"", what));
    if (got == 0) {
      return error(Code::kAborted, "\"{}\" ended at byte {} while being copied; retry", what,
                   offset);
    }
    ROSETCTL_RETURN_IF_ERROR(
        write_all(dst_fd, buffer.data(), static_cast<std::size_t>(got), offset, what));
    offset += got;
  }
  return Status::ok();
}

}  // namespace

FileVersion FileVersion::of(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size), ns_of(st.st_mtim),
          ns_of(st.st_ctim)};
}

int64_t mtime_ns_of(const struct stat& st) {
  return ns_of(st.st_mtim);
}

Expected<HashedContent> hash_content(int src_fd, int64_t size, int dst_fd, ContentBuffer& buffer,
                                     const std::string& what) {
  if (buffer.size() < kContentBufferBytes) buffer.resize(kContentBufferBytes);
  Sha256 hash;
  HashedContent result;
  int64_t offset = 0;
  while (offset < size && !result.short_read) {
    int64_t start = 0, end = 0;
    ROSETCTL_RETURN_IF_ERROR(next_data_segment(src_fd, offset, size, &start, &end, what));
    hash.update_zeros(static_cast<uint64_t>(start - offset));
    offset = start;
    while (offset < end) {
      // A large file is many buffers: a client that gave up is noticed within one.
      ROSETCTL_RETURN_IF_ERROR(check_current_call());
      std::size_t want = static_cast<std::size_t>(std::min<int64_t>(end - offset, buffer.size()));
      ssize_t got = ::pread(src_fd, buffer.data(), want, offset);
      if (got < 0) {
        if (errno == EINTR) continue;
        return errno_status(errno, fmt::format("cannot read \"{}\"", what));
      }
      if (got == 0) {
        result.short_read = true;
        break;
      }
      hash.update(buffer.data(), static_cast<std::size_t>(got));
      if (dst_fd >= 0) {
        ROSETCTL_RETURN_IF_ERROR(
            write_all(dst_fd, buffer.data(), static_cast<std::size_t>(got), offset, what));
      }
      offset += got;
    }
  }
  // A trailing hole and a file cut short look alike to SEEK_DATA: ask for the size again.
  struct stat st;
  if (::fstat(src_fd, &st) != 0)
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", what));
  if (st.st_size < size) result.short_read = true;
  if (dst_fd >= 0 && ::ftruncate(dst_fd, size) != 0) {
    return errno_status(errno, fmt::format("cannot size the copy of \"{}\"", what));
  }
  result.sha256 = hash.finish_hex();
  return result;
}

Expected<bool> clone_content(int src_fd, int dst_fd, const std::string& what) {
  if (::ioctl(dst_fd, FICLONE, src_fd) == 0) return true;
  switch (errno) {
    case EOPNOTSUPP:
    case EXDEV:
    case EINVAL:
    case ENOTTY:
    case ENOSYS:
      return false;
    default:
      return errno_status(errno, fmt::format("cannot clone \"{}\" (FICLONE)", what));
  }
}

Status copy_content(int src_fd, int dst_fd, int64_t size, const std::string& what) {
  int64_t offset = 0;
  while (offset < size) {
    int64_t start = 0, end = 0;
    ROSETCTL_RETURN_IF_ERROR(next_data_segment(src_fd, offset, size, &start, &end, what));
    offset = start;
    while (offset < end) {
      // In pieces, so a client that gave up is noticed within one (a clone of a large file).
      ROSETCTL_RETURN_IF_ERROR(check_current_call());
      loff_t in = offset, out = offset;
      auto piece = static_cast<std::size_t>(std::min<int64_t>(end - offset, kCopyPieceBytes));
      ssize_t copied = ::copy_file_range(src_fd, &in, dst_fd, &out, piece, 0);
      if (copied < 0) {
        if (errno == EINTR) continue;
        if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS) {
          return errno_status(errno, fmt::format("cannot copy \"{}\"", what));
        }
        // No in-kernel copy between these two files: copy through a buffer.
        ROSETCTL_RETURN_IF_ERROR(copy_range_by_read(src_fd, dst_fd, offset, end, what));
        offset = end;
        break;
      }
      if (copied == 0) {
        return error(Code::kAborted, "\"{}\" ended at byte {} while being copied; retry", what,
                     offset);
      }
      offset += copied;
    }
  }
  if (::ftruncate(dst_fd, size) != 0) {
    return errno_status(errno, fmt::format("cannot size the copy of \"{}\"", what));
  }
  return Status::ok();
}

Expected<bool> clone_or_copy(int src_fd, int dst_fd, int64_t size, const std::string& what) {
  auto cloned = clone_content(src_fd, dst_fd, what);
  if (!cloned) return cloned.status();
  if (*cloned) {
    // The source may have been longer than `size` when it was cloned.
    if (::ftruncate(dst_fd, size) != 0) {
      return errno_status(errno, fmt::format("cannot size the clone of \"{}\"", what));
    }
    return true;
  }
  ROSETCTL_RETURN_IF_ERROR(copy_content(src_fd, dst_fd, size, what));
  return false;
}

}  // namespace rosetctl
