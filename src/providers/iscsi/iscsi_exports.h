// The controller side of the iscsi provider's map/unmap (ControllerPublish/Unpublish, OIM's
// MapVolume/UnmapVolume): one target per volume, its ACL holding exactly the initiator names of
// the nodes the volume is published to. The state database is the truth and the target daemon a
// cache: whatever the daemon lost (it keeps nothing across its restart) is made again from the
// database and the CHAP records, at start, whenever a call finds a target missing, and when the
// target watcher (target_watcher.h) sees tgtd restarted or emptied.
//
// CHAP is on for every publication: map gives each node its own account on the volume's target
// (made at random, or the caller's chap-user and chap-password secrets), kept in ChapRecords so
// that a target comes back with it; the target has an account of its own that it answers with
// when the node asks it to prove itself (mutual CHAP). The node fetches its credentials over
// its mutual TLS (publish_secrets); the publish context carries only the account's name.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/state_store.h"
#include "providers/iscsi/chap_records.h"
#include "providers/iscsi/target_backend.h"
#include "providers/provider.h"

namespace rosetctl::iscsi {

class IscsiExports {
 public:
  // `portal`: what consumers are told to log in to ("ADDR:PORT"); `image_of` maps a volume id
  // to its image file.
  IscsiExports(std::string provider_name, std::unique_ptr<TargetBackend> backend,
               std::string portal, StateStore& store,
               std::function<std::string(std::string_view)> image_of, ChapRecords chap);

  TargetBackend& backend() { return *backend_; }
  const std::string& portal() const { return portal_; }

  // Exports a new (or restored, or cloned) volume: its target, LUN 1 and serial, no initiator.
  Status export_volume(std::string_view volume_id);
  // Removes the volume's target (DeleteVolume; the daemon has refused it while mapped).
  Status unexport_volume(std::string_view volume_id);
  // LUN 1 takes the image's new size.
  Status resize(std::string_view volume_id);

  // Lets `node`'s initiator in with its own CHAP account (`chap`: the caller's credentials;
  // none: those kept for the node, or new random ones); the publish context the consumer logs
  // in with, which names the account and says the secrets are the controller's to give.
  // FAILED_PRECONDITION when the node registered no initiator name. ControllerPublishVolume
  // and a node's re-registration under a new initiator name both come here
  // (daemon/node_mapping.h), so there is one way an initiator gets on an ACL.
  Expected<StringMap> map(std::string_view volume_id, const NodeRecord& node,
                          const std::optional<ChapCredentials>& chap);
  // Takes the node's initiator off the ACL (ending its sessions) and its account off the
  // target. Idempotent.
  Status unmap(std::string_view volume_id, const NodeRecord& node);
  // The node's CHAP secrets of the volume (CSI secret keys chap-user, chap-password and, for
  // mutual CHAP, chap-user-in, chap-password-in). FAILED_PRECONDITION when none are kept (a
  // publication from before CHAP was on by default: map the volume to the node again).
  Expected<StringMap> secrets_of(std::string_view volume_id, const NodeRecord& node);

  // Makes every target, ACL and CHAP account the database and the CHAP records know (volumes
  // of `provider_name`, their publications). Returns what it changed, one line each. A
  // publication that asked for CHAP before its secrets were kept stays closed to its node
  // until the volume is published to it again.
  Expected<std::vector<std::string>> restore();

  // The target watcher's check (target_watcher.h): one look at the daemon's targets; when a
  // volume's target is missing, has no LUN, or lets none of the nodes it is published to in (a
  // tgtd restarted or emptied), it says so in the log and restores. What it saw is what
  // target_condition and targets_problem report until the next look.
  void check_targets();
  // The volume's target as the database says it should be, or abnormal saying what is missing;
  // from a look at most a few seconds old (taken now when older: the CLI runs no watcher).
  VolumeCondition target_condition(std::string_view volume_id);
  // OK, or UNAVAILABLE naming the volumes whose targets are missing (Probe).
  Status targets_problem();

 private:
  // What one look found wrong, by volume id; `reachable` false when the daemon did not answer.
  struct Look {
    std::map<std::string, std::string> wrong;
    bool reachable = true;
  };
  Expected<Look> look();
  // The last look, or a new one when it is older than kLookTtl.
  Expected<Look> recent_look();
  void remember(const Look& look);

  // Makes the target's CHAP accounts those of the records: every node's and the target's own.
  // `force`: set them even when the target already lists accounts of those names (a password
  // changed). No records: the target takes no CHAP. Whether it changed anything; NOT_FOUND
  // when the backend has no target for the volume.
  Expected<bool> apply_chap(std::string_view volume_id, bool force);
  // Runs `step`; when the backend lost the target (NOT_FOUND), restores and runs it once more.
  Status with_target(std::string_view volume_id, const std::function<Status()>& step);

  std::unique_ptr<TargetBackend> backend_;
  std::string portal_;
  StateStore& store_;
  std::function<std::string(std::string_view)> image_of_;
  ChapRecords chap_;
  std::mutex looked_mutex_;
  std::optional<Look> looked_;                         // guarded by looked_mutex_
  std::chrono::steady_clock::time_point looked_at_{};  // guarded by looked_mutex_
  std::string reported_down_;  // why the daemon last did not answer, as logged; the watcher's
  std::string provider_name_;  // whose volume records are ours
  // Held by map, unmap and restore, whose record reads and target changes must not interleave
  // (restore runs inside map when a target is found missing: hence recursive).
  std::recursive_mutex mutex_;
};

}  // namespace rosetctl::iscsi
