// The memo of stagings whose publications all answered (daemon/checked_stagings.h).
#include "daemon/checked_stagings.h"

namespace rosetctl {

bool CheckedStagings::all_answered(const std::string& staging_path, MountId id) const {
  if (id == 0) return false;
  std::lock_guard lock(mutex_);
  auto found = checked_.find(staging_path);
  return found != checked_.end() && found->second == id;
}

void CheckedStagings::remember(const std::string& staging_path, MountId id) {
  if (id == 0) return;
  std::lock_guard lock(mutex_);
  if (checked_.size() >= kMaxEntries && !checked_.contains(staging_path)) checked_.clear();
  checked_[staging_path] = id;
}

}  // namespace rosetctl
