// Garbage collection of the commit store: mark every tree and blob reachable from a commit
// file, sweep the rest. Runs under the exclusive GC lock, so no commit is in flight: commits
// hold the lock shared from their first blob until they are recorded. A GC killed halfway only
// leaves garbage for the next one; it never removes a reachable object.
#pragma once

#include <cstdint>

#include "core/commit_store/commit_store.h"

namespace rosetctl {

struct GcReport {
  int64_t commits = 0;  // live commits (the roots)
  int64_t trees_removed = 0;
  int64_t blobs_removed = 0;
  int64_t bytes_reclaimed = 0;  // disk blocks of the removed blobs
};

// FAILED_PRECONDITION without removing anything when `lock` is not exclusive; DATA_LOSS
// (again removing nothing) when a commit or tree cannot be read, since its objects could not
// be told apart from garbage.
Expected<GcReport> collect_garbage(const CommitStore& store, const StoreLock& lock);

}  // namespace rosetctl
