// ControllerPublishVolume and ControllerUnpublishVolume on this host: a volume mapped to a node
// through its provider (daemon/node_mapping.h), and the publication recorded.
#include <fmt/format.h>

#include <algorithm>

#include "core/validate.h"
#include "daemon/controller_checks.h"
#include "daemon/controller_service.h"
#include "daemon/convert.h"
#include "daemon/csi_secrets.h"
#include "daemon/node_mapping.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {
namespace {

// The registry's record of a node; for this plugin's own node when it never registered, a
// record with only its id. Only the id too when the volume's provider maps without the record
// (ControllerSide::maps_use_node_record): no read of the registry.
Expected<NodeRecord> node_record(ServiceContext& context, const LoadedVolume& volume,
                                 std::string_view node_id) {
  auto controller = controller_side(*volume.provider);
  if (controller && !(*controller)->maps_use_node_record()) {
    NodeRecord id_only;
    id_only.node_id = std::string(node_id);
    return id_only;
  }
  auto node = context.store.find_node(node_id);
  if (!node) return node.status();
  if (node->has_value()) return std::move(**node);
  NodeRecord own;
  own.node_id = std::string(node_id);
  return own;
}

}  // namespace

// Registered with this plugin: rosetctl.v1.Registry.
Status ControllerService::check_node_registered(std::string_view node_id) {
  if (node_id == context_.options.node_id) return Status::ok();
  auto node = context_.store.find_node(node_id);
  if (!node) return node.status();
  if (node->has_value()) return Status::ok();
  return error(Code::kNotFound,
               "node \"{}\" is not registered with this controller (rosetctl node list shows the "
               "registered nodes; a node registers with `rosetctl node register`, `rosetctl serve "
               "--role node --controller ...` or its first CLI call)",
               node_id);
}

Expected<StringMap> ControllerService::map_to_node(
    const LoadedVolume& volume, const csi::v1::ControllerPublishVolumeRequest& request) {
  auto node = node_record(context_, volume, request.node_id());
  if (!node) return node.status();
  return map_volume_to_node(volume, *node, csi_secrets(request.secrets()));
}

Status ControllerService::publish_volume(const csi::v1::ControllerPublishVolumeRequest& request,
                                         csi::v1::ControllerPublishVolumeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.node_id(), "node_id"));
  if (!request.has_volume_capability()) {
    return error(Code::kInvalidArgument, "volume_capability is required");
  }
  auto capability = capability_from_proto(request.volume_capability(), "volume_capability");
  if (!capability) return capability.status();

  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  auto publish_lock = context_.locks.try_lock(
      node_publish_lock_key(request.volume_id(), request.node_id()), LockMode::kExclusive,
      busy_message(
          fmt::format("volume \"{}\" on node \"{}\"", request.volume_id(), request.node_id())));
  if (!publish_lock) return publish_lock.status();

  auto volume = load_volume(context_, request.volume_id());
  if (!volume) return volume.status();
  ROSETCTL_RETURN_IF_ERROR(refuse_moving_volume(context_, request.volume_id()));
  // Held until the publication is recorded, so the node cannot be removed in between.
  auto node_lock =
      context_.locks.try_lock(node_lock_key(request.node_id()), LockMode::kShared,
                              busy_message(fmt::format("node \"{}\"", request.node_id())));
  if (!node_lock) return node_lock.status();
  // A node's own registry is not the controller's (it holds no other node): for a volume placed
  // on it, the controller checked the target is registered before it forwarded the call.
  if (volume->provider->publish_needs_registered_node() &&
      context_.options.role != PluginRole::kNode) {
    ROSETCTL_RETURN_IF_ERROR(check_node_registered(request.node_id()));
  }
  if (volume->provider->volumes_are_node_local() && request.node_id() != context_.options.node_id) {
    // The node exists (registered), but this volume cannot reach it: the spec's "volume
    // incompatible with the node" (FAILED_PRECONDITION), not an unknown node (NOT_FOUND).
    return error(Code::kFailedPrecondition,
                 "node \"{}\" cannot reach volume \"{}\": {} volumes live on the node that "
                 "created them and can only be published to node \"{}\"; to use one on node "
                 "\"{}\", make it there (volume create --node {}; in CSI, its topology), and "
                 "for volumes that other hosts attach, use --provider roset or --provider iscsi",
                 request.node_id(), volume->record.name, volume->provider->name(),
                 context_.options.node_id, request.node_id(), request.node_id());
  }
  std::string wanted_type = capability->access_type == AccessType::kBlock ? "block" : "mount";
  if (volume->record.access_type != wanted_type) {
    return error(Code::kInvalidArgument,
                 "volume \"{}\" is a {} volume; it cannot be published for {} access",
                 volume->record.name, volume->record.access_type, wanted_type);
  }

  std::string key = capability_key(*capability);
  // The volume's publications in one read: this node's (a repeated publish) and the others (its
  // access mode's limit).
  auto others = context_.store.controller_publications(request.volume_id());
  if (!others) return others.status();
  auto existing = std::find_if(others->begin(), others->end(), [&](const auto& publication) {
    return publication.node_id == request.node_id();
  });
  if (existing != others->end()) {
    const ControllerPublication& publication = *existing;
    if (publication.readonly != request.readonly() || publication.capability != key) {
      return error(Code::kAlreadyExists,
                   "volume \"{}\" is already published to node \"{}\" with a different capability "
                   "or read-only flag",
                   volume->record.name, request.node_id());
    }
    // Mapped again: a target daemon may have lost what it had (mapping is idempotent).
    auto mapped = map_to_node(*volume, request);
    if (!mapped) return mapped.status();
    // What this mapping says wins over what the last one said (the CHAP account of new
    // secrets), and is recorded; what it does not say (no secrets this time) stays.
    ControllerPublication updated = publication;
    for (const auto& [key, value] : *mapped)
      updated.publish_context[key] = value;
    if (updated.publish_context != publication.publish_context) {
      ROSETCTL_RETURN_IF_ERROR(context_.store.upsert_controller_publication(updated));
    }
    fill_map(updated.publish_context, response->mutable_publish_context());
    return Status::ok();
  }

  AccessMode mode = capability->access_mode;
  bool single_node =
      mode == AccessMode::kSingleNodeWriter || mode == AccessMode::kSingleNodeReaderOnly ||
      mode == AccessMode::kSingleNodeSingleWriter || mode == AccessMode::kSingleNodeMultiWriter;
  if (single_node && !others->empty()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is already published to node \"{}\" and its access mode {} allows "
                 "one node",
                 volume->record.name, others->front().node_id, access_mode_name(mode));
  }
  if (context_.options.max_volumes_per_node > 0) {
    auto count = context_.store.count_controller_publications_on_node(request.node_id());
    if (!count) return count.status();
    if (*count >= context_.options.max_volumes_per_node) {
      return error(Code::kResourceExhausted,
                   "node \"{}\" already has {} volumes published (the limit)", request.node_id(),
                   *count);
    }
  }

  // The node can reach the volume before the publication is recorded: a crash in between
  // leaves a mapping the retry makes again, never a record of a mapping that does not exist.
  auto mapped = map_to_node(*volume, request);
  if (!mapped) return mapped.status();
  ControllerPublication publication{request.volume_id(),
                                    request.node_id(),
                                    request.readonly(),
                                    key,
                                    {{"readonly", request.readonly() ? "true" : "false"}}};
  publication.publish_context.insert(mapped->begin(), mapped->end());
  ROSETCTL_RETURN_IF_ERROR(context_.store.upsert_controller_publication(publication));
  fill_map(publication.publish_context, response->mutable_publish_context());
  return Status::ok();
}

Status ControllerService::unpublish_volume(
    const csi::v1::ControllerUnpublishVolumeRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  if (!request.node_id().empty()) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.node_id(), "node_id"));
  }
  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();

  auto publications = context_.store.controller_publications(request.volume_id());
  if (!publications) return publications.status();
  // A volume or node we do not know is, by definition, not published there: OK (spec).
  for (const auto& publication : *publications) {
    if (!request.node_id().empty() && publication.node_id != request.node_id()) continue;
    auto lock = context_.locks.try_lock(
        node_publish_lock_key(request.volume_id(), publication.node_id), LockMode::kExclusive,
        busy_message(
            fmt::format("volume \"{}\" on node \"{}\"", request.volume_id(), publication.node_id)));
    if (!lock) return lock.status();
    auto volume = load_volume(context_, request.volume_id());
    if (!volume) return volume.status();
    auto node = node_record(context_, *volume, publication.node_id);
    if (!node) return node.status();
    // Unmapped first: a crash before the record goes leaves a record the retry unmaps again.
    ROSETCTL_RETURN_IF_ERROR(unmap_volume_from_node(*volume, *node));
    ROSETCTL_RETURN_IF_ERROR(
        context_.store.delete_controller_publication(request.volume_id(), publication.node_id));
  }
  return Status::ok();
}

}  // namespace rosetctl
