// Making a new directory from stored or live content: restoring a commit, cloning a directory.
// Both share each file's extents with their source when the filesystem can (FICLONE on xfs
// with reflink, btrfs) and otherwise copy data segments in the kernel, keeping holes. Never
// hard links: the result is written to independently of its source.
#pragma once

#include <string>
#include <string_view>

#include "core/commit_store/commit_store.h"
#include "core/progress.h"

namespace rosetctl {

struct RestoreOutcome {
  int64_t files = 0;
  int64_t bytes = 0;
};

struct RestoreOptions {
  std::string title;  // progress phase title
  int workers = 1;
  ProgressSink* progress = nullptr;
};

// Fills the empty directory `destination` with commit `id`. The caller holds `lock` (shared).
// Blob sizes are checked against the tree (a full content check is `verify_store`'s job).
Expected<RestoreOutcome> restore_commit(const CommitStore& store, std::string_view id,
                                        const std::string& destination,
                                        const RestoreOptions& options, const StoreLock& lock);

// Fills the empty directory `destination` with a copy of `source`, which may be in use: each
// file is copied as one version of itself (see commit_directory.h), else ABORTED.
Expected<RestoreOutcome> clone_directory(const std::string& source, const std::string& destination,
                                         const RestoreOptions& options);

}  // namespace rosetctl
