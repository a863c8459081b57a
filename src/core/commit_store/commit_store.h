// The commit store: a content-addressed object store under the state dir.
//
//   blobs/<2 hex>/<sha256>   file contents, stored once however many files and commits share
//                            them; sparse where the source was; read-only
//   trees/<2 hex>/<sha256>   tree manifests (tree.h)
//   commits/<sha256>         commit objects (commit_object.h); every commit file is a GC root
//   index/<volume id>        per-volume stat caches that make re-commits incremental
//   lock                     the GC lock (flock): shared by commits, restores and verification,
//                            exclusive for garbage collection
//
// Objects are written to anonymous files (O_TMPFILE) and linked into place only when complete,
// so a crash never leaves a partial object under a real name, and no temp files to clean up.
// An object found under the name a commit is about to write is never trusted by its name alone
// (it may have been damaged since it was stored): a blob is replaced by the content in hand, a
// tree or commit compared and replaced when it differs. Readers check what they read: trees and
// commits on every read, blobs as restores copy them (blob_copy.h).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/commit_store/commit_object.h"
#include "core/commit_store/tree.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace rosetctl {

// A held GC lock; released when destroyed.
class StoreLock {
 public:
  StoreLock(UniqueFd fd, bool exclusive) : fd_(std::move(fd)), exclusive_(exclusive) {}
  bool exclusive() const { return exclusive_; }

 private:
  UniqueFd fd_;
  bool exclusive_;
};

class CommitStore {
 public:
  // Creates the layout under `root` (0700) when missing.
  static Expected<std::unique_ptr<CommitStore>> open(const std::string& root);

  const std::string& root() const { return root_; }

  // Waits up to `patience` for the GC lock; ABORTED naming who to wait for after that.
  Expected<StoreLock> lock_shared(std::chrono::milliseconds patience) const;
  Expected<StoreLock> lock_exclusive(std::chrono::milliseconds patience) const;

  // --- blobs
  bool has_blob(std::string_view id) const;
  // NOT_FOUND when missing.
  Expected<UniqueFd> open_blob(std::string_view id) const;
  // A new anonymous writable file on the store's filesystem; becomes a blob by add_blob().
  Expected<UniqueFd> new_blob_file() const;
  // Names the file written through `fd` as blob `id` once its content is on disk, so a blob's
  // name never outlives its content in a crash. False when a blob of that name existed: it is
  // not trusted (it may have been damaged since), this file takes its place (no read needed).
  // The caller must have hashed exactly what `fd` holds.
  Expected<bool> add_blob(int fd, std::string_view id) const;
  Status remove_blob(std::string_view id) const;
  // Calls `visit(id, bytes on disk)` for every blob.
  Status for_each_blob(const std::function<void(std::string_view, int64_t)>& visit) const;
  // Makes the names of blobs `ids` durable before a commit may name them (their content is, by
  // add_blob). Where one fsync commits every earlier metadata change (xfs, ext4 with a journal:
  // fsync_scope.h) put_commit's fsync does it; elsewhere the fan-out directories are fsynced
  // here, on up to `workers` threads.
  Status sync_blob_names(const std::vector<std::string>& ids, int workers) const;
  // Whether put_commit's fsync alone makes earlier objects' names and sizes durable.
  bool one_fsync_commits_all() const { return one_fsync_commits_all_; }

  // --- trees
  // Writes the tree unless an equal one is stored and intact; returns its id.
  Expected<std::string> put_tree(const Tree& tree) const;
  // NOT_FOUND when missing, DATA_LOSS when its content does not hash to `id`.
  Expected<Tree> read_tree(std::string_view id) const;
  Status remove_tree_object(std::string_view id) const;
  Status for_each_tree(const std::function<void(std::string_view)>& visit) const;

  // --- commits
  // Durable when it returns (the file and its directory are fsynced); returns the commit id.
  Expected<std::string> put_commit(const CommitObject& commit) const;
  Expected<CommitObject> read_commit(std::string_view id) const;
  bool has_commit(std::string_view id) const;
  Expected<std::vector<std::string>> commit_ids() const;
  Status remove_commit(std::string_view id) const;

  std::string stat_cache_path(std::string_view volume_id) const;
  // Removes every volume's stat cache; called whenever a damaged object is found. A cache names
  // blobs that the next commit reuses without reading the file, so it would keep naming a
  // damaged one; without it, the next commit of each volume reads every file again and stores
  // what it reads over any damaged blob (add_blob). Only a cache: the cost is one full read per
  // volume, so a failure is logged, not returned.
  void distrust_stat_caches() const;

 private:
  CommitStore() = default;
  // Waits until the object written through `fd` is on disk: its data, and its inode too unless
  // one_fsync_commits_all_ (then the journal commits the inode before any name of it).
  Status wait_until_stored(int fd, const std::string& shown) const;

  std::string root_;
  UniqueFd root_fd_;
  UniqueFd blobs_fd_;
  UniqueFd trees_fd_;
  UniqueFd commits_fd_;
  bool one_fsync_commits_all_ = false;
};

}  // namespace rosetctl
