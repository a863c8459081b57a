// Committing a directory: walk it, store the content of every file not already stored (reusing
// the stat cache for files that did not change since the last commit), write the tree and the
// commit object.
//
// Consistency: each file is captured as one version of itself. Its version (inode, size, mtime,
// ctime) is taken before and after the read; if it moved, the read is retried, and after
// kMaxCaptureAttempts the commit fails with ABORTED. There is no point in time across files: a
// directory that is written to during the commit is captured file by file.
#pragma once

#include <cstdint>
#include <string>

#include "core/commit_store/commit_store.h"
#include "core/progress.h"

namespace rosetctl {

inline constexpr int kMaxCaptureAttempts = 3;
// Threads reading files and writing blobs per worker asked for: they spend as long waiting for
// the disk as hashing (measured in bench/README.md).
inline constexpr int kCaptureThreadsPerWorker = 4;

struct CommitRequest {
  std::string directory;  // what to commit
  std::string volume_id;  // identity recorded in the commit; keys the stat cache
  std::string volume_name;
  std::string parent;  // previous commit of the volume, or ""
  std::string message;
  int64_t time_ns = 0;  // commit time
  int workers = 1;      // CPUs to use; capture runs kCaptureThreadsPerWorker threads per worker
  ProgressSink* progress = nullptr;
};

struct CommitOutcome {
  std::string id;
  CommitObject commit;
  int64_t new_bytes = 0;     // size of the blobs this commit added to the store
  int64_t reused_files = 0;  // files whose content came from the stat cache without reading
};

// The caller holds `lock` (shared) until the commit is recorded wherever it is referenced, so
// garbage collection cannot take objects from under it.
Expected<CommitOutcome> commit_directory(const CommitStore& store, const CommitRequest& request,
                                         const StoreLock& lock);

}  // namespace rosetctl
