// What rosetctl records of each mount it makes, so that it knows the mount again later: in the
// mount namespace it was made in by its unique id, and in another one (the node plugin
// restarted in a new container, whose copies of the same mounts arrived by mount propagation
// with new ids) by a fingerprint that every copy of the mount shares.
#pragma once

#include <string>
#include <string_view>

#include "core/mount_point.h"
#include "core/mountinfo.h"

namespace rosetctl {

// What every copy of a mount shows in any namespace: the filesystem (its device number and
// type) and the directory of it the mount shows. A bind mount of the same directory by hand
// shares it too, which is why it decides only where the unique id cannot.
struct MountFingerprint {
  unsigned major = 0;
  unsigned minor = 0;
  std::string fs_type;  // without a FUSE subtype: "fuse", where mountinfo says "fuse.bindfs"
  std::string root;     // "/" for the whole filesystem

  bool empty() const { return fs_type.empty(); }
  bool matches(const MountEntry& entry) const;
  // "8:16 ext4 /sub dir" for the state database ("" when empty); the root goes last because it
  // may hold spaces.
  std::string to_text() const;
  static MountFingerprint from_text(std::string_view text);  // empty when malformed

  bool operator==(const MountFingerprint&) const = default;
};

MountFingerprint fingerprint_of(const MountEntry& entry);

// Which mount namespace this process is in, as the unique id of the mount its root directory
// is on: a mount belongs to one namespace and unique ids are never given again (until the
// machine restarts), whereas the inode of /proc/self/ns/mnt goes to a new namespace once the
// old one is gone. 0 when the kernel gives no unique ids.
MountId current_mount_namespace();

struct RecordedMount {
  MountId id = 0;        // its unique id; 0: not known (ownership falls back to "whatever")
  MountId mount_ns = 0;  // current_mount_namespace() where it was made; 0: not recorded
  MountFingerprint fingerprint;

  bool operator==(const RecordedMount&) const = default;
};

// The mount now at `path`, to record after a stage or publish made it (or a restarted node
// plugin recognised it); just {0} when there is none or the kernel gives no unique ids.
RecordedMount record_mount_at(const std::string& path);

}  // namespace rosetctl
