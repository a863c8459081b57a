// The filesystems an image volume can carry (ext4, xfs): which ones, their minimum sizes, and
// the helper programs that make and grow them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

inline constexpr std::string_view kDefaultFilesystem = "ext4";

// The filesystem to use for a requested CSI fs_type: "" means ext4; ext4 and xfs are
// supported; anything else is INVALID_ARGUMENT listing the supported ones.
Expected<std::string> checked_filesystem(std::string_view requested);

// The smallest image the filesystem can be made on (mkfs.xfs refuses less than 300 MiB).
int64_t minimum_filesystem_bytes(std::string_view filesystem);

// The filesystem options an image volume is mounted with: "nouuid" for xfs, which otherwise
// refuses to mount a filesystem whose UUID is mounted already, as a restore or clone of a
// connected volume is (a copy carries its source's UUID; xfs documents nouuid for snapshots).
std::string mount_data(std::string_view filesystem);

// mkfs on a device known to carry no signature (see core/fs_signature.h). Never forced.
Status make_filesystem(std::string_view filesystem, const std::string& device);

// Grows the unmounted filesystem on `device` to the device's size. ext4: e2fsck -f -p, then
// resize2fs. xfs can only grow mounted: see grow_filesystem_online.
Status grow_filesystem_offline(std::string_view filesystem, const std::string& device);

// Whether the mounted filesystem can grow in place here: xfs always; ext4 needs
// CAP_SYS_RESOURCE (its online resize ioctl checks it).
bool can_grow_online(std::string_view filesystem);

// Grows the filesystem on `device`, mounted at `mount_point`, to the device's size.
Status grow_filesystem_online(std::string_view filesystem, const std::string& device,
                              const std::string& mount_point);

}  // namespace rosetctl
