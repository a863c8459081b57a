// The node side of the roset provider: one roset-fuse process per (API URL, mount id,
// credential), shared by every staging that needs it and counted by its users. A staging is a
// bind mount of the volume's folder inside that process's mount. The last unstage stops the
// process and removes its credentials. Processes outlive `serve`; a restarted `serve` adopts
// them (reconcile), and a dead one is restarted when a staging is found dead (revive).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "providers/provider.h"
#include "providers/roset/fuse_record.h"
#include "providers/roset/roset_config.h"

namespace rosetctl {

struct FuseSettings {
  std::string root;         // <state>/roset
  std::string fuse_binary;  // name on PATH or absolute path
  FuseCredentials credentials = FuseCredentials::kFile;
  std::chrono::milliseconds ready_timeout{120'000};
  std::chrono::milliseconds stop_grace{5'000};
};

// Checks the endpoint's key with the API before a process is started for it, so a bad key is
// UNAUTHENTICATED from the API rather than a FUSE client that dies.
using AccessCheck = std::function<Status(const RosetEndpoint&)>;
// Told when a user's staging was bound again after its process restarted (a new mount there,
// which the daemon's staging record must name).
using Rebound = std::function<void(const FuseUser&)>;

class SharedFuseMounts {
 public:
  SharedFuseMounts(FuseSettings settings, AccessCheck check_access, Rebound rebound)
      : settings_(std::move(settings)),
        check_access_(std::move(check_access)),
        rebound_(std::move(rebound)) {}

  // Absolute path of the FUSE client, or FAILED_PRECONDITION saying how to get one.
  Expected<std::string> fuse_binary() const;

  // Starts or reuses the endpoint's process, then bind-mounts its `user.folder` at
  // `user.staging_path` (read-only when asked). Leaves nothing behind on failure.
  Status stage(const RosetEndpoint& endpoint, const FuseUser& user);
  // Unmounts the staging and drops it as a user; the last user stops the process.
  Status unstage(std::string_view volume_id, const std::string& staging_path);
  // The staging is dead: restarts the process if it is gone or its mount is dead, then binds
  // every staging it serves again. NOT_FOUND when no process serves this staging.
  Status revive(std::string_view volume_id, const std::string& staging_path);
  // Whether the staging's folder is bound read-only (a restored volume).
  bool staged_read_only(std::string_view volume_id, const std::string& staging_path) const;
  // roset-fuse processes on our mountpoints that no record knows (orphans of a crash), which
  // reconcile stops.
  std::vector<ProcessIdentity> unrecorded_clients() const;
  // The processes whose record says they run and that are alive now.
  int running_clients() const;
  // Health of the process serving the volume on this node.
  VolumeCondition condition(std::string_view volume_id) const;
  // Startup: forgets users whose staging the daemon no longer records, stops processes left
  // without users, restarts dead ones that still have users, adopts live ones, and ends FUSE
  // clients running on our mountpoints that no record knows (orphans of a crash).
  Status reconcile(const std::function<bool(const FuseUser&)>& still_staged);

 private:
  struct Located {
    FuseFiles files;
    std::string key;
  };
  std::string key_of(const RosetEndpoint& endpoint) const;
  FuseFiles files_of(std::string_view key) const;
  std::string lock_path(std::string_view key) const;
  // Keys whose record lists this staging.
  std::vector<std::string> keys_serving(std::string_view volume_id,
                                        const std::string& staging_path) const;
  std::vector<std::string> all_keys() const;
  // With the key's lock held: makes sure the process runs with a live mount; `restarted`
  // tells whether the existing users' bind mounts point at a dead mount now.
  Status ensure_running(const FuseFiles& files, FuseRecord& record, const RosetEndpoint& endpoint,
                        bool* restarted);
  Status start_process(const FuseFiles& files, FuseRecord& record, const RosetEndpoint& endpoint);
  Status stop_and_remove(const FuseFiles& files, const FuseRecord& record);
  Status bind_user(const FuseFiles& files, const FuseUser& user) const;
  Status rebind_users(const FuseFiles& files, const FuseRecord& record) const;
  Status kill_orphans();

  FuseSettings settings_;
  AccessCheck check_access_;
  Rebound rebound_;
};

}  // namespace rosetctl
