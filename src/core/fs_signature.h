// What a block device or image file already holds, as libblkid sees it: the guard against
// ever formatting a device that carries data.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace rosetctl {

// The signature found on `path`: a filesystem type ("ext4", "xfs", "swap", ...), or
// "partition table <type>" ("partition table gpt"), or "several conflicting signatures".
// nullopt when there is none that libblkid knows (a zeroed device). An unreadable device is an
// error, never "nothing there".
Expected<std::optional<std::string>> probe_signature(const std::string& path);

}  // namespace rosetctl
