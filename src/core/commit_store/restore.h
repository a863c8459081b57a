// Making a new directory from stored or live content: restoring a commit, cloning a directory.
// Both share each file's extents with their source when the filesystem can (FICLONE on xfs
// with reflink, btrfs), keeping holes otherwise: a restore copies through a buffer, hashing what
// it copies; a clone copies data segments in the kernel (a live file has no hash to check). Never
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
  int64_t reused_files = 0;  // taken from RestoreOptions::reuse_directory instead of copied
};

struct RestoreOptions {
  std::string title;  // progress phase title
  int workers = 1;
  ProgressSink* progress = nullptr;
  // The commit came from another host: strip_privileged_metadata (tree.h) before restoring.
  bool from_another_host = false;
  // A directory that holds commit `reuse_commit` as restore_commit made it (with the same
  // from_another_host), private to the caller: its files that the restored commit holds
  // unchanged at the same path are moved into the destination instead of copied
  // (materialize_tree.h says which). What is left there is the caller's to remove.
  std::string reuse_directory;
  std::string reuse_commit;
};

// Fills the empty directory `destination` with commit `id`. The caller holds `lock` (shared).
// Every blob is checked against its name as it is copied (blob_copy.h): DATA_LOSS naming the
// file and the blob when one is missing or damaged (and the stat caches are dropped:
// CommitStore::distrust_stat_caches); `destination` then holds part of the tree, which the
// caller removes.
Expected<RestoreOutcome> restore_commit(const CommitStore& store, std::string_view id,
                                        const std::string& destination,
                                        const RestoreOptions& options, const StoreLock& lock);

// Fills the empty directory `destination` with a copy of `source`, which may be in use: each
// file is copied as one version of itself (see commit_directory.h), else ABORTED.
Expected<RestoreOutcome> clone_directory(const std::string& source, const std::string& destination,
                                         const RestoreOptions& options);

}  // namespace rosetctl
