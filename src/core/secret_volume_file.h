// A key of a Kubernetes Secret volume, reached through the links kubelet's atomic writer makes:
// in the mounted directory DIR, DIR/KEY -> ..data/KEY, DIR/..data -> ..TIMESTAMP, and the file
// itself DIR/..TIMESTAMP/KEY. read_private_file never follows a symlink to a secret (the mode it
// checks must be the file's own); this follows exactly that layout, and nothing else, so that a
// pod names a Secret's key by its plain path.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "core/unique_fd.h"

namespace rosetctl {

// `path` names a symlink (lstat said so). Opens the regular file it stands for when the links
// are exactly kubelet's: KEY's target is "..data/KEY", ..data's is "..NAME" (no '/'), ..NAME is
// a directory (not a link) in the same directory, ..NAME/KEY is opened without following a link,
// and the two links, the directory and the file all belong to one owner, root or this process's
// user. Anything else: PERMISSION_DENIED saying which link or file is not as kubelet makes it.
// The returned descriptor is the file's (O_RDONLY|O_NONBLOCK|O_NOCTTY); its mode is the caller's
// to check.
Expected<UniqueFd> open_secret_volume_file(const std::string& path, std::string_view what);

}  // namespace rosetctl
