// Whether the mount at a path is the one rosetctl made there, judged by the unique mount id
// recorded when it was made: the rule every unmount of a staging or publication follows, so
// that a mount someone else put there (by hand, or stacked on top of ours) is never taken away.
#pragma once

#include <optional>
#include <string>

#include "core/mount_point.h"
#include "core/mountinfo.h"
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

  // "a tmpfs mount" / "a fuse.bindfs mount": what is there, for messages.
  std::string describe_top() const;
};

// Judges what is mounted at `path` (absolute, canonical) against `recorded`. With `recorded` 0
// (a record from before ids were recorded, or a kernel without unique ids) whatever is mounted
// there counts as ours, as rosetctl judged before.
Expected<MountAtPath> judge_mount(const std::string& path, MountId recorded);

}  // namespace rosetctl
