// Targets and ACLs made from the state database.
#include "providers/iscsi/iscsi_exports.h"

#include "core/iscsi_name.h"
#include "core/log.h"
#include "core/validate.h"
#include "providers/iscsi/iscsi_context.h"

namespace rosetctl::iscsi {
namespace {

// Marks a publication that asked for CHAP (never the secret itself).
constexpr std::string_view kPublishChap = "chap";

}  // namespace

IscsiExports::IscsiExports(std::string provider_name, std::unique_ptr<TargetBackend> backend,
                           std::string portal, StateStore& store,
                           std::function<std::string(std::string_view)> image_of)
    : backend_(std::move(backend)),
      portal_(std::move(portal)),
      store_(store),
      image_of_(std::move(image_of)),
      provider_name_(std::move(provider_name)) {}

Status IscsiExports::export_volume(std::string_view volume_id) {
  return backend_->ensure_target({std::string(volume_id), image_of_(volume_id)}).status();
}

Status IscsiExports::unexport_volume(std::string_view volume_id) {
  return backend_->remove_target(volume_id);
}

Status IscsiExports::resize(std::string_view volume_id) {
  TargetSpec spec{std::string(volume_id), image_of_(volume_id)};
  return with_target(volume_id, [&] { return backend_->resize_lun(spec); });
}

Status IscsiExports::with_target(std::string_view volume_id, const std::function<Status()>& step) {
  Status first = step();
  if (first.code() != Code::kNotFound) return first;
  // The target daemon lost its targets (restarted): the database brings them back.
  spdlog::warn(
      "iSCSI target of volume {} missing from {}: restoring every target from the state "
      "database",
      escape_text(volume_id), backend_->name());
  auto restored = restore();
  if (!restored) return restored.status();
  return step();
}

Expected<StringMap> IscsiExports::map(std::string_view volume_id, const NodeRecord& node,
                                      const std::optional<ChapCredentials>& chap) {
  if (node.iscsi_initiator.empty()) {
    return error(Code::kFailedPrecondition,
                 "node \"{}\" registered no iSCSI initiator name, so no iSCSI volume can be "
                 "mapped to it; install open-iscsi there (it writes "
                 "/etc/iscsi/initiatorname.iscsi) and let the node register again",
                 node.node_id);
  }
  // Registration takes only the normal form; a record from before it may hold another.
  if (Status name = validate_iscsi_name(
          node.iscsi_initiator,
          fmt::format("node \"{}\"'s registered iscsi_initiator", node.node_id));
      !name) {
    return Status(Code::kFailedPrecondition,
                  fmt::format("{}; then let the node register again", name.message()));
  }
  const std::string& initiator = node.iscsi_initiator;
  if (chap) ROSETCTL_RETURN_IF_ERROR(validate_chap(*chap));
  auto target = backend_->ensure_target({std::string(volume_id), image_of_(volume_id)});
  if (!target) return target.status();
  StringMap context = {{std::string(kPublishPortal), portal_},
                       {std::string(kPublishTarget), backend_->iqn(volume_id)},
                       {std::string(kPublishLun), std::to_string(kIscsiVolumeLun)},
                       {std::string(kPublishSerial), std::string(volume_id)}};
  if (chap) {
    std::string account;
    ROSETCTL_RETURN_IF_ERROR(with_target(volume_id, [&] {
      auto set = backend_->set_chap(volume_id, *chap);
      if (set) account = std::move(*set);
      return set.status();
    }));
    context[std::string(kPublishChap)] = "true";
    context[std::string(kPublishChapUser)] = account;
  } else {
    ROSETCTL_RETURN_IF_ERROR(check_chap_kept(volume_id, node, *target));
  }
  ROSETCTL_RETURN_IF_ERROR(
      with_target(volume_id, [&] { return backend_->bind_initiator(volume_id, initiator); }));
  return context;
}

// Mapped again without its secrets (a repeated publish, or a node's new initiator name bound in
// place of its old one), a publication that asked for CHAP must still find the target's
// account: binding the initiator to a target that lost it (tgtd restarted; the secret is never
// stored) would let the node in without CHAP. It then stays closed, as restore() leaves it.
Status IscsiExports::check_chap_kept(std::string_view volume_id, const NodeRecord& node,
                                     const TargetInfo& target) {
  auto publication = store_.find_controller_publication(volume_id, node.node_id);
  if (!publication) return publication.status();
  bool had_chap = publication->has_value() &&
                  (*publication)->publish_context.contains(std::string(kPublishChap));
  if (!had_chap || !target.chap_users.empty()) return Status::ok();
  return error(Code::kFailedPrecondition,
               "volume \"{}\" is mapped to node \"{}\" with CHAP, and tgtd no longer holds its "
               "account (it restarted?); CHAP secrets are never stored, so the volume stays closed "
               "to the node until it is mapped again with its secrets (chap-user, chap-password)",
               volume_id, node.node_id);
}

Status IscsiExports::unmap(std::string_view volume_id, const NodeRecord& node) {
  if (node.iscsi_initiator.empty()) return Status::ok();  // never let in
  // Not a name in normal form (a record from before registration checked it): map refused it,
  // so it was never bound.
  if (!validate_iscsi_name(node.iscsi_initiator, "iscsi_initiator")) return Status::ok();
  Status unbound = backend_->unbind_initiator(volume_id, node.iscsi_initiator);
  // A target the daemon lost lets nobody in: the unmap is done.
  return unbound.code() == Code::kNotFound ? Status::ok() : unbound;
}

Expected<std::vector<std::string>> IscsiExports::restore() {
  std::lock_guard<std::mutex> one_at_a_time(restore_mutex_);
  std::vector<std::string> done;
  auto volumes = store_.list_volumes("", 0);
  if (!volumes) return volumes.status();
  std::erase_if(*volumes,
                [&](const VolumeRecord& volume) { return volume.provider != provider_name_; });
  if (volumes->empty()) return done;  // nothing to export: the target daemon is not asked
  auto existing = backend_->list_targets();
  if (!existing) return existing.status();
  auto has = [&](const std::string& id) {
    for (const TargetInfo& target : *existing) {
      if (target.volume_id == id) return &target;
    }
    return static_cast<const TargetInfo*>(nullptr);
  };
  for (const VolumeRecord& volume : *volumes) {
    const TargetInfo* target = has(volume.id);
    if (target == nullptr || !target->has_lun) {
      ROSETCTL_RETURN_IF_ERROR(export_volume(volume.id));
      done.push_back(fmt::format("exported volume \"{}\" again", volume.name));
    }
    auto publications = store_.controller_publications(volume.id);
    if (!publications) return publications.status();
    for (const ControllerPublication& publication : *publications) {
      auto node = store_.find_node(publication.node_id);
      if (!node) return node.status();
      if (!node->has_value() || (*node)->iscsi_initiator.empty()) continue;
      const std::string& initiator = (*node)->iscsi_initiator;
      // A name not in normal form was never bound (map refuses it): nothing to restore.
      if (!validate_iscsi_name(initiator, "iscsi_initiator")) continue;
      bool bound = target != nullptr &&
                   std::find(target->initiators.begin(), target->initiators.end(), initiator) !=
                       target->initiators.end();
      if (bound) continue;
      if (publication.publish_context.contains(std::string(kPublishChap))) {
        done.push_back(fmt::format(
            "volume \"{}\" stays closed to node \"{}\": its CHAP secret is never stored; publish "
            "it to the node again (volume connect there) with its secrets",
            volume.name, publication.node_id));
        continue;
      }
      ROSETCTL_RETURN_IF_ERROR(backend_->bind_initiator(volume.id, initiator));
      done.push_back(fmt::format("let node \"{}\" in to volume \"{}\" again", publication.node_id,
                                 volume.name));
    }
  }
  return done;
}

}  // namespace rosetctl::iscsi
