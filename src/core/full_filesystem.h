// Which filesystem ran out of space. A write that fails with ENOSPC says so about one file
// ("cannot write the copy of blob ...: No space left on device"); what the operator needs is
// which filesystem to free space on, and how much it has left.
#pragma once

#include <string>

#include "core/status.h"

namespace rosetctl {

// `status` with the filesystem holding `dir` named (its mount point, type, free and total
// space) when it says a disk or quota is full (ENOSPC, EDQUOT or SQLite's SQLITE_FULL), and
// unchanged otherwise: a RESOURCE_EXHAUSTED for other limits (file descriptors, a remote quota)
// says nothing about this filesystem.
Status name_full_filesystem(Status status, const std::string& dir);

}  // namespace rosetctl
