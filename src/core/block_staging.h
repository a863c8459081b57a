// A staged raw block volume: a tiny tmpfs at the staging path holding one device node, which
// NodePublish bind-mounts at the target. Shared by every provider that hands out block devices
// (image volumes' loop devices, iSCSI disks).
#pragma once

#include <sys/types.h>

#include <string>

#include "core/status.h"

namespace rosetctl {

// The name of the device node inside a block staging.
inline constexpr const char* kStagedDeviceNode = "device";

// Mounts the staging tmpfs at `staging` and makes the node `name` for device `numbers` in it.
// Leaves nothing mounted on failure.
Status stage_block_device(const std::string& staging, dev_t numbers,
                          const char* name = kStagedDeviceNode);

// mknod `name` (a block device node for `numbers`, mode 0600) inside the staging directory,
// through its pinned descriptor: never following a symlink on the way.
Status make_device_node(const std::string& staging, const char* name, dev_t numbers);

// The device numbers of block device node `node`; INTERNAL when it is not a block device.
Expected<dev_t> device_numbers(const std::string& node);

}  // namespace rosetctl
