// Targets and ACLs made from the state database.
#include "providers/iscsi/iscsi_exports.h"

#include <algorithm>

#include "core/iscsi_name.h"
#include "core/log.h"
#include "core/validate.h"
#include "providers/iscsi/iscsi_context.h"
#include "providers/volume_context.h"

namespace rosetctl::iscsi {
namespace {

// Marks a publication that asked for CHAP (never the secret itself).
constexpr std::string_view kPublishChap = "chap";

}  // namespace

IscsiExports::IscsiExports(std::string provider_name, std::unique_ptr<TargetBackend> backend,
                           std::string portal, StateStore& store,
                           std::function<std::string(std::string_view)> image_of, ChapRecords chap)
    : backend_(std::move(backend)),
      portal_(std::move(portal)),
      store_(store),
      image_of_(std::move(image_of)),
      chap_(std::move(chap)),
      provider_name_(std::move(provider_name)) {}

Status IscsiExports::export_volume(std::string_view volume_id) {
  return backend_->ensure_target({std::string(volume_id), image_of_(volume_id)}).status();
}

Status IscsiExports::unexport_volume(std::string_view volume_id) {
  ROSETCTL_RETURN_IF_ERROR(backend_->remove_target(volume_id));
  return chap_.remove_volume(volume_id);
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
  if (chap) {
    ROSETCTL_RETURN_IF_ERROR(validate_chap(*chap));
    if (chap->user == kTargetChapUser) {
      return error(Code::kInvalidArgument,
                   "chap-user \"{}\" is the name of the target's own account (mutual CHAP); "
                   "choose another",
                   kTargetChapUser);
    }
  }
  std::lock_guard lock(mutex_);
  auto target = backend_->ensure_target({std::string(volume_id), image_of_(volume_id)});
  if (!target) return target.status();

  // The node's own account: the caller's, or the one kept for it, or a new one.
  auto kept = chap_.of_node(volume_id, node.node_id);
  if (!kept) return kept.status();
  ChapCredentials own = chap ? *chap : kept->has_value() ? **kept : random_chap();
  bool changed = !kept->has_value() || **kept != own;
  if (changed && chap) {
    // One password per account name: another node's account of that name with another
    // password would stop working (one secret shared by several nodes, a StorageClass's, is
    // one account).
    auto others = chap_.of_volume(volume_id);
    if (!others) return others.status();
    for (const auto& [other, credentials] : *others) {
      if (other != node.node_id && credentials.user == chap->user && credentials != *chap) {
        return error(Code::kAlreadyExists,
                     "chap-user {} is node \"{}\"'s CHAP account on volume \"{}\"; choose "
                     "another for node \"{}\"",
                     display_quoted(chap->user), other, volume_id, node.node_id);
      }
    }
  }
  // Kept before the target takes it, so that a restore after a crash in between has it.
  if (changed) ROSETCTL_RETURN_IF_ERROR(chap_.put_node(volume_id, node.node_id, own));
  ROSETCTL_RETURN_IF_ERROR(
      with_target(volume_id, [&] { return apply_chap(volume_id, changed).status(); }));
  ROSETCTL_RETURN_IF_ERROR(
      with_target(volume_id, [&] { return backend_->bind_initiator(volume_id, initiator); }));
  return StringMap{{std::string(kPublishPortal), portal_},
                   {std::string(kPublishTarget), backend_->iqn(volume_id)},
                   {std::string(kPublishLun), std::to_string(kIscsiVolumeLun)},
                   {std::string(kPublishSerial), std::string(volume_id)},
                   {std::string(kPublishChap), "true"},
                   {std::string(kPublishChapUser), backend_->chap_account(volume_id, own.user)},
                   {kPublishSecretsFromController, "controller"}};
}

Expected<bool> IscsiExports::apply_chap(std::string_view volume_id, bool force) {
  auto nodes = chap_.of_volume(volume_id);
  if (!nodes) return nodes.status();
  auto targets = backend_->list_targets();
  if (!targets) return targets.status();
  auto ours = std::find_if(targets->begin(), targets->end(),
                           [&](const TargetInfo& t) { return t.volume_id == volume_id; });
  if (ours == targets->end()) {
    return error(Code::kNotFound, "volume \"{}\" has no iSCSI target in {}", volume_id,
                 backend_->name());
  }
  if (nodes->empty()) {
    if (ours->chap_users.empty() && ours->chap_users_out.empty()) return false;
    ROSETCTL_RETURN_IF_ERROR(backend_->clear_chap(volume_id));
    return true;
  }
  auto own = chap_.target(volume_id);
  if (!own) return own.status();
  std::vector<ChapCredentials> incoming;
  std::vector<std::string> wanted;
  for (const auto& [node, credentials] : *nodes) {
    if (std::find(incoming.begin(), incoming.end(), credentials) != incoming.end()) continue;
    incoming.push_back(credentials);  // nodes sharing one secret share its account
    wanted.push_back(backend_->chap_account(volume_id, credentials.user));
  }
  std::vector<std::string> bound = ours->chap_users;
  std::sort(wanted.begin(), wanted.end());
  std::sort(bound.begin(), bound.end());
  bool same =
      bound == wanted && ours->chap_users_out ==
                             std::vector<std::string>{backend_->chap_account(volume_id, own->user)};
  if (same && !force) return false;
  auto set = backend_->set_chap_accounts(volume_id, incoming, *own);
  if (!set) return set.status();
  return true;
}

Status IscsiExports::unmap(std::string_view volume_id, const NodeRecord& node) {
  std::lock_guard lock(mutex_);
  // Not a name in normal form (a record from before registration checked it): map refused it,
  // so it was never bound.
  if (!node.iscsi_initiator.empty() &&
      validate_iscsi_name(node.iscsi_initiator, "iscsi_initiator")) {
    Status unbound = backend_->unbind_initiator(volume_id, node.iscsi_initiator);
    // A target the daemon lost lets nobody in: the unmap is done.
    if (!unbound && unbound.code() != Code::kNotFound) return unbound;
  }
  // No node id: only an old initiator name of the node goes (move_node_mappings), its
  // publication and CHAP account stay.
  if (node.node_id.empty()) return Status::ok();
  auto kept = chap_.of_node(volume_id, node.node_id);
  if (!kept) return kept.status();
  if (!kept->has_value()) return Status::ok();
  ROSETCTL_RETURN_IF_ERROR(chap_.remove_node(volume_id, node.node_id));
  // Its account goes from the target too, so its password opens nothing any more.
  auto applied = apply_chap(volume_id, false);
  return applied.status().code() == Code::kNotFound ? Status::ok() : applied.status();
}

Expected<StringMap> IscsiExports::secrets_of(std::string_view volume_id, const NodeRecord& node) {
  auto kept = chap_.of_node(volume_id, node.node_id);
  if (!kept) return kept.status();
  if (!kept->has_value()) {
    return error(Code::kFailedPrecondition,
                 "the controller keeps no CHAP secret of node \"{}\" for volume \"{}\" (it was "
                 "published before CHAP was on by default); publish it to the node again",
                 node.node_id, volume_id);
  }
  auto target = chap_.target(volume_id);
  if (!target) return target.status();
  return StringMap{
      {std::string(kSecretChapUser), backend_->chap_account(volume_id, (*kept)->user)},
      {std::string(kSecretChapPassword), (*kept)->password},
      {std::string(kSecretChapUserIn), backend_->chap_account(volume_id, target->user)},
      {std::string(kSecretChapPasswordIn), target->password}};
}

Expected<std::vector<std::string>> IscsiExports::restore() {
  std::lock_guard lock(mutex_);
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
    // CHAP before any initiator is let in: a target made again has an empty ACL till then.
    auto chap = apply_chap(volume.id, false);
    if (!chap) return chap.status();
    if (*chap)
      done.push_back(fmt::format("gave volume \"{}\" its CHAP accounts again", volume.name));
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
      auto kept = chap_.of_node(volume.id, publication.node_id);
      if (!kept) return kept.status();
      if (publication.publish_context.contains(std::string(kPublishChap)) && !kept->has_value()) {
        done.push_back(fmt::format(
            "volume \"{}\" stays closed to node \"{}\": it was mapped with CHAP secrets that "
            "were never kept; publish it to the node again (volume connect there)",
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
