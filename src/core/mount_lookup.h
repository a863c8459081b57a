// One mount looked up by its mount point, at a cost that does not grow with the number of mounts.
//
// Reading /proc/self/mountinfo costs time in proportion to every mount in the namespace: on a
// node with a hundred published pods, the node service spent most of a NodePublishVolume or
// NodeUnpublishVolume formatting and parsing lines it did not need.
#pragma once

#include <optional>
#include <string>

#include "core/mountinfo.h"
#include "core/status.h"

namespace rosetctl {

// The topmost mount at `path` (absolute, without symlinks), or nullopt when nothing is mounted
// there: the answer MountTable::read()->find_by_target(path) gives. On Linux >= 6.8, statx says
// whether `path` is the root of a mount and which one, and statmount(2) describes that mount
// alone. The table is read instead on older kernels, when `path` cannot be stat'ed (a dead
// FUSE mount on the way), or when the kernel names another mount point for it. A mount hidden
// by a later mount on a directory above it is not found: nothing can reach it by `path` either.
//
// Filled either way: mount_id, parent_id, major, minor, root, mount_point, fs_type and
// mount_options (the per-mount flags, "rw,nosuid,relatime"). Left empty either way, so that no
// caller comes to depend on a kernel version: source, super_options and optional_fields (read
// the table for those).
Expected<std::optional<MountEntry>> find_mount(const std::string& path);

// The mount with this unique id (MountEntry::unique_id), wherever it is, or nullopt when it no
// longer exists. Needs statmount(2) (Linux 6.8+). Fills the same fields as find_mount, both
// ids included.
Expected<std::optional<MountEntry>> find_mount_by_id(uint64_t unique_id);

}  // namespace rosetctl
