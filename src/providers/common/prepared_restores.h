// Restores made ahead: a commit restored into "<volumes>/.prepared-<commit>" before a volume is
// made from a later commit of the same volume (a move's last pre-copy round, restored on the
// receiving node before the pause), so that the restore inside the pause moves the files that
// did not change instead of copying them (RestoreOptions::reuse_directory). Only an
// optimisation: a prepared directory nobody claims is removed by the next collection once its
// commit is gone or it is an hour old, and a restore that finds none copies everything.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/commit_store/commit_store.h"
#include "core/unique_fd.h"

namespace rosetctl {

std::string prepared_restore_dir(const std::string& volumes_dir, std::string_view commit_id);

// A prepared directory taken for one restore: renamed to a name of its own (so no other restore
// takes it too) and flocked; removed with whatever is left in it when this goes.
class ClaimedRestore {
 public:
  // The first of `commits` prepared here, claimed for volume `volume_id`; nullopt when none is.
  static std::optional<ClaimedRestore> claim(const std::string& volumes_dir,
                                             std::string_view volume_id,
                                             const std::vector<std::string>& commits);
  ClaimedRestore(ClaimedRestore&&) noexcept = default;
  ClaimedRestore& operator=(ClaimedRestore&&) = delete;
  ~ClaimedRestore();

  const std::string& path() const { return path_; }
  const std::string& commit() const { return commit_; }

 private:
  ClaimedRestore(std::string path, std::string commit, UniqueFd held)
      : path_(std::move(path)), commit_(std::move(commit)), held_(std::move(held)) {}
  std::string path_;
  std::string commit_;
  UniqueFd held_;
};

// Prepared directories whose commit is gone from `store`, or older than an hour.
void remove_stale_prepared_restores(const std::string& volumes_dir, const CommitStore& store);

}  // namespace rosetctl
