// The controller side of the iscsi provider's map/unmap (ControllerPublish/Unpublish, OIM's
// MapVolume/UnmapVolume): one target per volume, its ACL holding exactly the initiator names of
// the nodes the volume is published to. The state database is the truth and the target daemon a
// cache: whatever the daemon lost (it keeps nothing across its restart) is made again from the
// database, at start and whenever a call finds a target missing.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/state_store.h"
#include "providers/iscsi/target_backend.h"
#include "providers/provider.h"

namespace rosetctl::iscsi {

class IscsiExports {
 public:
  // `portal`: what consumers are told to log in to ("ADDR:PORT"); `image_of` maps a volume id
  // to its image file.
  IscsiExports(std::string provider_name, std::unique_ptr<TargetBackend> backend,
               std::string portal, StateStore& store,
               std::function<std::string(std::string_view)> image_of);

  TargetBackend& backend() { return *backend_; }
  const std::string& portal() const { return portal_; }

  // Exports a new (or restored, or cloned) volume: its target, LUN 1 and serial, no initiator.
  Status export_volume(std::string_view volume_id);
  // Removes the volume's target (DeleteVolume; the daemon has refused it while mapped).
  Status unexport_volume(std::string_view volume_id);
  // LUN 1 takes the image's new size.
  Status resize(std::string_view volume_id);

  // Lets `node`'s initiator in (and CHAP when `chap` is given: the publish context then names
  // the CHAP user to log in as); the publish context the consumer logs in with.
  // FAILED_PRECONDITION when the node registered no initiator name, or when the node's
  // publication asked for CHAP, none is given, and the target no longer has its account.
  // ControllerPublishVolume and a node's re-registration under a new initiator name both come
  // here (daemon/node_mapping.h), so there is one way an initiator gets on an ACL.
  Expected<StringMap> map(std::string_view volume_id, const NodeRecord& node,
                          const std::optional<ChapCredentials>& chap);
  // Takes the node's initiator off the ACL (ending its sessions). Idempotent.
  Status unmap(std::string_view volume_id, const NodeRecord& node);

  // Makes every target and ACL the database knows (volumes of `provider_name`, their
  // publications). Returns what it changed, one line each. CHAP accounts are not kept (the
  // secret is never stored): a target that had one stays closed to its nodes until the volume
  // is published to them again with its secrets.
  Expected<std::vector<std::string>> restore();

 private:
  // FAILED_PRECONDITION when the node's publication asked for CHAP and the target lost its
  // account: it must not be bound without its secrets.
  Status check_chap_kept(std::string_view volume_id, const NodeRecord& node,
                         const TargetInfo& target);
  // Runs `step`; when the backend lost the target (NOT_FOUND), restores and runs it once more.
  Status with_target(std::string_view volume_id, const std::function<Status()>& step);

  std::unique_ptr<TargetBackend> backend_;
  std::string portal_;
  StateStore& store_;
  std::function<std::string(std::string_view)> image_of_;
  std::string provider_name_;  // whose volume records are ours
  std::mutex restore_mutex_;   // one restore at a time
};

}  // namespace rosetctl::iscsi
