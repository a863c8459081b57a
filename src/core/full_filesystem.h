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
// says nothing about this filesystem. A status that names one already is returned as it is.
Status name_full_filesystem(Status status, const std::string& dir);

// The state directory this process's full-disk errors are about: serve's and a CLI run's plugin
// set it once (cluster/plugin.cc), so that every CSI answer names the filesystem, not only the
// CLI's (cli/app.cc). Empty until set.
void set_process_state_directory(const std::string& dir);
std::string process_state_directory();

}  // namespace rosetctl
