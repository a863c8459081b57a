// Where things live under the state directory (default /var/lib/rosetctl).
#pragma once

#include <string>

#include "core/status.h"

namespace rosetctl {

inline constexpr const char* kDefaultStateDir = "/var/lib/rosetctl";

struct StateLayout {
  std::string root;  // normalised absolute path

  std::string database() const { return root + "/state.db"; }
  std::string lock_file() const { return root + "/locks"; }
  // Provider data (local volumes), never a mount target.
  std::string volumes_dir() const { return root + "/volumes"; }
  // Data of deleted volumes waiting to be removed.
  std::string trash_dir() const { return root + "/trash"; }
  // Staging mounts made by the CLI (kubelet brings its own staging paths).
  std::string staging_dir() const { return root + "/staging"; }
  // Default mount targets of `volume connect` without --target: the one place inside the
  // state dir that may be a target.
  std::string mounts_dir() const { return root + "/mnt"; }
  // The local provider's commit store (snapshots): content-addressed objects and commits.
  std::string commit_store_dir() const { return root + "/store"; }

  // Creates the directories (0700; mnt 0755 so users can reach their mounts).
  Status ensure_directories() const;
};

}  // namespace rosetctl
