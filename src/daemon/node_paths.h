// Filesystem checks for the paths the node service mounts on: canonical form, directories it
// creates (and so may remove), emptiness.
#pragma once

#include <string>
#include <string_view>

#include "core/state_layout.h"
#include "core/status.h"

namespace rosetctl {

// The absolute path with its parent resolved through symlinks (mountinfo shows resolved paths,
// so this is the form records and mount lookups must use). The last component itself must not
// be a symlink: a mount would follow it somewhere else. The parent must exist.
Expected<std::string> canonical_mount_path(std::string_view path, std::string_view field);

// canonical_mount_path, refusing the state directory (and anything containing it) except
// strictly below `allowed_inside_state` (the CLI's staging area, or its default mount area).
Expected<std::string> checked_mount_path(const StateLayout& layout, std::string_view path,
                                         std::string_view field,
                                         const std::string& allowed_inside_state);

// Whether a mount volume can be published at `target` (canonical): missing (it will be
// created), or an empty directory that is not a mount point (core/mount_point.h's
// check_mount_point; the mount itself checks again through the descriptor it mounts on). Another
// mount there is ALREADY_EXISTS, a file INVALID_ARGUMENT, a non-empty directory FAILED_PRECONDITION
// (mounting over it would hide its contents).
Status check_publish_target(const std::string& target);

// Whether a block volume can be published at `target` (canonical): missing (a file will be
// created for the device to be bound onto), or an empty regular file that is not a mount point.
Status check_block_target(const std::string& target);

// Makes sure `path` is a regular file (created empty, 0600). Returns true when this call created
// it, false when it was already there.
Expected<bool> ensure_file(const std::string& path, std::string_view field);

// Removes a publish target this plugin created: an empty directory or an empty regular file;
// one that holds something now is left in place (with a warning). A missing path is fine.
// Like every path operation here, it goes through the pinned parent (core/mount_point.h), so
// a symlink swapped into the path cannot point it elsewhere.
Status remove_target(const std::string& path);

// Makes sure `path` is a directory. Returns true when this call created it (so the caller
// may remove it later), false when it was already there.
Expected<bool> ensure_directory(const std::string& path, std::string_view field);

// rmdir that tolerates a missing path, and leaves a directory that is not empty in place.
Status remove_directory(const std::string& path);

}  // namespace rosetctl
