// Freezing a mounted filesystem (FIFREEZE) so that the device under it holds a consistent image
// while that image is copied, and thawing it (FITHAW) whatever happens meanwhile.
//
// A freeze outlives the process that made it: the kernel keeps the filesystem frozen until
// someone thaws it. The guard thaws on every path out of the copy, and a process that called
// thaw_on_fatal_signals() thaws on SIGINT/SIGTERM/SIGHUP/SIGQUIT before it dies; only SIGKILL
// leaves a frozen filesystem, which thaw_filesystem (called by startup reconcile) releases.
#pragma once

#include <string>

#include "core/status.h"
#include "core/unique_fd.h"

namespace rosetctl {

class FrozenFilesystem {
 public:
  // Freezes the filesystem mounted at `mount_point` (any directory of it will do): its dirty
  // data and metadata are written to its device and new writes wait until the thaw.
  // FAILED_PRECONDITION when it is frozen already (by `fsfreeze`, or by a process that died
  // holding a freeze): that lasts until someone thaws it, so it is no call in flight (ABORTED).
  static Expected<FrozenFilesystem> freeze(const std::string& mount_point);

  FrozenFilesystem(FrozenFilesystem&& other) noexcept = default;
  FrozenFilesystem& operator=(FrozenFilesystem&&) = delete;
  ~FrozenFilesystem();

  // Thaws now (the destructor then does nothing); the error, if any, is the caller's to report.
  Status thaw();

 private:
  FrozenFilesystem(UniqueFd fd, std::string mount_point)
      : fd_(std::move(fd)), mount_point_(std::move(mount_point)) {}
  UniqueFd fd_;  // invalid once thawed
  std::string mount_point_;
};

// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT that thaw every filesystem this
// process holds frozen, then die of the signal as they would have. For the CLI: Ctrl-C during a
// snapshot of a connected image volume must not leave its writers blocked.
void thaw_on_fatal_signals();

// Whether the filesystem at `mount_point` is frozen now. The kernel tells only through FIFREEZE
// (EBUSY when frozen already), so a filesystem that is not frozen is frozen and thawed at once:
// its dirty data is written out meanwhile, and writers wait that long. Health checks call it
// only when a freeze is suspected (providers/common/freeze_mark.h), never on every check.
Expected<bool> filesystem_is_frozen(const std::string& mount_point);

// Thaws the filesystem at `mount_point` if it is frozen. True when it was.
Expected<bool> thaw_filesystem(const std::string& mount_point);

}  // namespace rosetctl
