// Committing a directory: walk it, store the content of every file not already stored (reusing
// the stat cache for files that did not change since the last commit), write the tree and the
// commit object.
//
// Consistency: each file is captured as one version of itself. Its version (inode, size, mtime,
// ctime) is taken before and after the read; if it moved, the read is retried, and after
// kMaxCaptureAttempts the commit fails with FAILED_PRECONDITION. There is no point in time across
// files: a directory that is written to during the commit is captured file by file.
//
// A pre-copy commit (CommitRequest::keep_changing_files) gives that guarantee up: a file written to
// while it is read keeps the bytes read (its blob still matches its name) and stays out of the stat
// cache, so the next commit reads it again. Only for a commit that a consistent one follows (a
// move's rounds before its paused final delta): most of a changing file's bytes travel early.
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
  bool keep_changing_files = false;  // a pre-copy: see the top of this file
};

struct CommitOutcome {
  std::string id;
  CommitObject commit;
  int64_t new_bytes = 0;       // size of the blobs this commit added to the store
  int64_t reused_files = 0;    // files whose content came from the stat cache without reading
  int64_t changing_files = 0;  // pre-copy only: files kept as read while they were written to
};

// The caller holds `lock` (shared) until the commit is recorded wherever it is referenced, so
// garbage collection cannot take objects from under it.
Expected<CommitOutcome> commit_directory(const CommitStore& store, const CommitRequest& request,
                                         const StoreLock& lock);

}  // namespace rosetctl
