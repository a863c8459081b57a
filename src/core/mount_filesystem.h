// Mounting a filesystem itself (not a bind): the filesystem on a block device, or a small
// tmpfs. Companion to mount_ops.h, whose MountGuard undoes these too.
#pragma once

#include <string>
#include <string_view>

#include "core/mount_ops.h"
#include "core/status.h"

namespace rosetctl {

// mount(2) of `device`'s filesystem of type `fs_type` on `target`, read-only and with per-mount
// flags (MS_NOSUID, ...) as `options` asks, and the filesystem's own options in `data`.
Status mount_device(const std::string& device, const std::string& target, std::string_view fs_type,
                    const MountOptions& options, const std::string& data = "");

// A tmpfs on `target` with mount data such as "size=16k,mode=0700", and `flags` (MS_NOSUID...).
Status mount_tmpfs(const std::string& target, const std::string& data, unsigned long flags);

}  // namespace rosetctl
