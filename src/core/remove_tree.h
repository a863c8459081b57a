// Recursive removal that never leaves the filesystem it starts on and never follows symlinks:
// deleting a volume must not reach through a stray mount or link into other data.
#pragma once

#include <string>

#include "core/status.h"

namespace rosetctl {

// Removes `path` and everything below it. A missing path is fine. A mount point found inside
// stops the removal with FAILED_PRECONDITION naming it (its contents are left alone).
Status remove_tree(const std::string& path);

}  // namespace rosetctl
