// Whether the mount at a path is the one rosetctl made there, judged by what was recorded when
// it was made (core/recorded_mount.h): the rule every unmount of a staging or publication
// follows, so that a mount someone else put there (by hand, or stacked on top of ours) is never
// taken away.
#pragma once

#include <optional>
#include <string>

#include "core/mount_point.h"
#include "core/mountinfo.h"
#include "core/recorded_mount.h"
#include "core/status.h"

namespace rosetctl {

enum class MountOwner {
  kNothing,  // nothing is mounted at the path (ours is gone, if there ever was one)
  kOurs,     // the topmost mount there is the recorded one
  kCovered,  // the recorded mount is there, under another mount stacked on top of it
  kForeign,  // something is mounted there, and the recorded mount is not
};

struct MountAtPath {
  MountOwner owner = MountOwner::kNothing;
  std::optional<MountEntry> top;  // the topmost mount at the path, when there is one
  // Ours, made in another mount namespace and recognised here by its fingerprint: what to
  // record instead from now on, so that later judgements go by its id here.
  std::optional<RecordedMount> adopted;

  // "a tmpfs mount" / "a fuse.bindfs mount": what is there, for messages.
  std::string describe_top() const;
};

// Judges what is mounted at `path` (absolute, canonical) against `recorded`. With `recorded.id`
// 0 (a record from before ids were recorded, or a kernel without unique ids) whatever is
// mounted there counts as ours, as rosetctl judged before.
//
// In the namespace the mount was made in, only the recorded id is ours. In another one (copies
// of mounts have new ids there) ours is the mount at the bottom of the stack at `path` when it
// has the recorded fingerprint: rosetctl mounts only where nothing is mounted yet, so anything
// above it was stacked on later and is not ours. A record without a namespace (made before
// they were recorded) or without a fingerprint is judged by its id alone.
Expected<MountAtPath> judge_mount(const std::string& path, const RecordedMount& recorded);

// The rule for another namespace, on this namespace's table: kOurs or kCovered when the
// bottom of the stack at `path` has `fingerprint`, kForeign when it does not, kNothing when
// nothing is mounted there. Sets `bottom` to the mount judged ours.
MountOwner judge_by_fingerprint(const MountTable& table, const std::string& path,
                                const MountFingerprint& fingerprint,
                                const MountEntry** bottom = nullptr);

}  // namespace rosetctl
