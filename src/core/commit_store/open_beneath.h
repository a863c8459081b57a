// Opening paths inside a tree without ever leaving it: openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV), so a symlink or ".." planted in a volume cannot make
// a commit read, or a restore write, anything outside that volume.
#pragma once

#include <sys/types.h>

#include <string>

namespace rosetctl {

// Like openat(root_fd, path, flags, mode) but confined to the tree below root_fd; -1 with
// errno set on failure (ELOOP for a symlink on the way, EXDEV for a mount crossing).
int open_beneath(int root_fd, const std::string& path, int flags, mode_t mode = 0);

}  // namespace rosetctl
