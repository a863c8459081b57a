// Verification of commits: every commit and tree still hashes to its id, and every blob they
// reference exists, has the recorded size and hashes to its name (each blob read once, however
// many commits hold it). A damaged object is reported for every commit that holds it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/commit_store/commit_store.h"
#include "core/progress.h"

namespace rosetctl {

struct VerifyReport {
  int64_t commits = 0;
  int64_t blobs = 0;
  int64_t bytes = 0;                  // blob bytes read and hashed
  std::vector<std::string> problems;  // one sentence each; empty when all is well
  // Commits that cannot be restored as they were taken (a problem names each), sorted.
  std::vector<std::string> damaged_commits;
};

// Problems are reported, not returned as errors; a non-OK status means verification itself
// could not run. When there are problems the stat caches are dropped
// (CommitStore::distrust_stat_caches). The caller holds `lock` (shared).
Expected<VerifyReport> verify_commits(const CommitStore& store, const std::vector<std::string>& ids,
                                      int workers, ProgressSink* progress, const StoreLock& lock);

}  // namespace rosetctl
