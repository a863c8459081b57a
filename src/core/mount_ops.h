// Mount operations through mount(2)/umount2(2) (no shelling out): bind mounts with per-mount
// flags, unmounting, the MountGuard that undoes a mount on failure, and probing for dead mounts.
#pragma once

#include <sys/mount.h>  // the MS_* values in MountOptions::flags
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/recorded_mount.h"
#include "core/status.h"

namespace rosetctl {

struct MountOptions {
  bool read_only = false;
  // MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME |
  // MS_STRICTATIME | MS_SYNCHRONOUS; never MS_RDONLY (that is read_only).
  unsigned long flags = 0;
};

// Turns CSI mount_flags / mountOptions ("ro", "noexec", or "nosuid,nodev" in one entry) into
// MountOptions, applied left to right as mount(8) does: "rw" undoes an earlier "ro". Anything
// else is INVALID_ARGUMENT naming the flag and listing the supported ones.
Expected<MountOptions> parse_mount_flags(const std::vector<std::string>& flags);

// Bind-mounts `source` on `target` (not recursively), onto an empty directory (or, for a file
// source such as a device node, an empty file) that is not a mount point. The copy of the
// source's mount gets its read-only flag and per-mount flags while still detached
// (mount_setattr), so it is never visible writable when asked to be read-only, and it is
// attached to `target` resolved once without symlinks and verified there afterwards
// (core/mount_point.h). The bind keeps the source mount's nosuid/nodev/noexec (and atime mode
// unless one is given), which the kernel requires in a user namespace. MS_SYNCHRONOUS belongs
// to the filesystem, not the mount: a bind inherits it from the mount it shows.
//
// `before_attach`, when given, is called with what the new mount is to be recorded as once it
// is built and before it is attached, so that its record can exist before the mount does and
// already name it (a failure stops the mount). What is read then: its unique id (move_mount
// keeps it), this mount namespace, and the fingerprint of the source's mount when the source is
// that mount's root (a bind of it shares it); id 0 or an empty fingerprint where the kernel or
// the source does not tell, which record_mount_at after the attach can fill in.
using BeforeAttach = std::function<Status(const RecordedMount& mount)>;
Status bind_mount(const std::string& source, const std::string& target, const MountOptions& options,
                  const BeforeAttach& before_attach = {});

// Unmounts the topmost mount at `target` through its parent directory, never following a
// symlink on the way. Codes the caller branches on: FAILED_PRECONDITION when `target` is not a
// mount point, NOT_FOUND when it does not exist (both mean "nothing to unmount"), UNAVAILABLE
// when it is busy (retry later).
Status unmount(const std::string& target);

// unmount(), with "nothing to unmount" as success: how providers take away the one mount the
// daemon has checked is theirs (see core/mount_ownership.h).
Status unmount_topmost(const std::string& target);

// Unmounts every mount stacked at `target` (re-reading the mount table between unmounts), for
// recovery from duplicate mounts. OK when nothing is mounted there.
Status unmount_all(const std::string& target);

// Owns a fresh mount until release(): on any early return the destructor unmounts it, lazily
// (MNT_DETACH) if it is busy, unless another mount now sits on top of it. Best effort, as a
// destructor cannot report.
class MountGuard {
 public:
  MountGuard() = default;
  // Guards the mount just made at `target`: the topmost one there now.
  explicit MountGuard(std::string target);
  ~MountGuard();
  MountGuard(MountGuard&& other) noexcept;
  MountGuard& operator=(MountGuard&& other) noexcept;
  MountGuard(const MountGuard&) = delete;
  MountGuard& operator=(const MountGuard&) = delete;

  // Success: keep the mount.
  void release() { active_ = false; }
  bool active() const { return active_; }
  const std::string& target() const { return target_; }

 private:
  void reset();

  std::string target_;
  uint64_t id_ = 0;  // its unique mount id; 0 when unknown
  bool active_ = false;
};

enum class PathHealth {
  kOk,
  kMissing,
  kDisconnected,  // ENOTCONN, ESTALE, EIO, ECONNABORTED: a dead FUSE or network mount
  kOther,
};

// stat(2)s `path`; `err_out` (when given) receives the errno, 0 on kOk.
PathHealth probe_path(const std::string& path, int* err_out = nullptr);

}  // namespace rosetctl
