// Which stagings had every recorded publication answering at their current mount, so that a
// NodePublish need not stat every sibling target again (a fan-out to N targets did N² stats).
//
// Why that is sound: a publication is a bind of its staging's filesystem, so it stops
// answering only when that filesystem does (the FUSE process behind it died), and then the
// staging stops answering too. A staging revived by its provider is a new mount with a new
// unique id (never reused until the machine restarts), bound targets of the old one stay dead:
// the id changed, so the check runs again. Kept per process: a restarted serve checks anew.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

#include "core/mount_point.h"

namespace rosetctl {

class CheckedStagings {
 public:
  // True when every recorded publication of `staging_path` answered while the staging was
  // the mount `id` (nonzero) and answered.
  bool all_answered(const std::string& staging_path, MountId id) const;
  // Remembers that they did; id 0 (a kernel without unique ids) remembers nothing.
  void remember(const std::string& staging_path, MountId id);

 private:
  // A bound on what stagings of long gone volumes leave here; clearing only costs a check.
  static constexpr size_t kMaxEntries = 4096;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, MountId> checked_;  // guarded by mutex_
};

}  // namespace rosetctl
