// Node RPCs of this host: staging here, publication in node_publish.cc, stats and expansion in
// node_stats.cc. Each mutation writes its record first (the intent) and then mounts, so a crash
// in between leaves a record a retry completes, never a mount nobody knows about.
#include "daemon/node_service.h"

#include "core/mount_ops.h"
#include "core/validate.h"
#include "daemon/call_log.h"
#include "daemon/convert.h"
#include "daemon/csi_secrets.h"
#include "daemon/node_checks.h"
#include "daemon/node_mounts.h"
#include "daemon/node_paths.h"
#include "daemon/node_repair.h"
#include "daemon/publish_secrets.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {

// ---------------------------------------------------------------- stage / unstage

Status NodeService::stage_volume(const csi::v1::NodeStageVolumeRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  auto staging = checked_mount_path(context_.layout, request.staging_target_path(),
                                    "staging_target_path", context_.layout.staging_dir());
  if (!staging) return staging.status();
  auto capability =
      required_capability(request.has_volume_capability(), request.volume_capability());
  if (!capability) return capability.status();

  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  auto stage_lock = try_lock_stage(context_.locks, request.volume_id(), LockMode::kExclusive);
  if (!stage_lock) return stage_lock.status();

  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  ROSETCTL_RETURN_IF_ERROR((*node)->check_volume_on_node(request.volume_id()));
  ROSETCTL_RETURN_IF_ERROR(check_access_type(context_, request.volume_id(), *capability));
  ROSETCTL_RETURN_IF_ERROR(refuse_moving_volume(context_, request.volume_id()));

  auto record = context_.store.find_staging(request.volume_id(), *staging);
  if (!record) return record.status();
  auto judged = judge_staging(context_.store, *staging, record->has_value() ? &**record : nullptr);
  if (!judged) return judged.status();
  std::string key = capability_key(*capability);
  if (judged->top) {
    if (!record->has_value()) {
      return error(Code::kAlreadyExists,
                   "staging_target_path \"{}\" already has a mount that is not volume \"{}\"",
                   *staging, request.volume_id());
    }
    ROSETCTL_RETURN_IF_ERROR(
        refuse_foreign_mount(*judged, request.volume_id(), "staging", *staging));
    if ((*record)->capability != key) {
      return error(Code::kAlreadyExists,
                   "volume \"{}\" is already staged at \"{}\" with a different capability",
                   request.volume_id(), *staging);
    }
    auto repaired = repair_dead_staging(context_, **node, request.volume_id(), *staging);
    if (!repaired) return repaired.status();
    // A record from before mount ids were recorded adopts the mount it describes.
    if (*repaired || (*record)->mount.id == 0) {
      return context_.store.set_staging_mount(request.volume_id(), *staging,
                                              record_mount_at(*staging));
    }
    return Status::ok();
  }

  // Secrets the controller keeps for this node's publication: asked for before anything is made.
  StringMap no_secrets;
  auto kept = request.publish_context().count(kPublishSecretsFromController) > 0
                  ? fetch_publish_secrets(context_, request.volume_id())
                  : Expected<StringMap>(no_secrets);
  if (!kept) return kept.status();

  auto created = ensure_directory(*staging, "staging_target_path");
  if (!created) return created.status();
  Staging staged{request.volume_id(), *staging, key,
                 *created || (record->has_value() && (*record)->created_dir)};
  ROSETCTL_RETURN_IF_ERROR(context_.store.upsert_staging(staged));

  StageSpec spec{request.volume_id(),
                 *staging,
                 *capability,
                 to_map(request.publish_context()),
                 to_map(request.volume_context()),
                 csi_secrets(request.secrets())};
  for (auto& [key, value] : *kept)
    spec.secrets[key] = std::move(value);  // the controller's for this node win
  if (Status status = (*node)->stage_volume(spec); !status) {
    (void)context_.store.delete_staging(request.volume_id(), *staging);
    if (staged.created_dir) (void)remove_directory(*staging);
    return status;
  }
  return context_.store.set_staging_mount(request.volume_id(), *staging, record_mount_at(*staging));
}

Status NodeService::unstage_volume(const csi::v1::NodeUnstageVolumeRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  auto staging = path_to_release(context_.layout, request.staging_target_path(),
                                 "staging_target_path", context_.layout.staging_dir());
  if (!staging) return staging.status();

  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  auto stage_lock = try_lock_stage(context_.locks, request.volume_id(), LockMode::kExclusive);
  if (!stage_lock) return stage_lock.status();

  auto record = context_.store.find_staging(request.volume_id(), *staging);
  if (!record) return record.status();
  auto judged = judge_staging(context_.store, *staging, record->has_value() ? &**record : nullptr);
  if (!judged) return judged.status();
  if (!record->has_value()) {
    if (judged->top) {
      return error(
          Code::kFailedPrecondition,
          "\"{}\" is mounted but rosetctl did not stage volume \"{}\" there; not touching it",
          *staging, request.volume_id());
    }
    auto node = context_.providers.node_for_volume(request.volume_id());
    if (!node) return node.status();
    return (*node)->check_volume_on_node(request.volume_id());  // NOT_FOUND or already done
  }

  auto publications = context_.store.node_publications_of_staging(request.volume_id(), *staging);
  if (!publications) return publications.status();
  for (const NodePublication& publication : *publications) {
    auto published = judge_publication(context_.store, publication.target_path, &publication);
    if (!published) return published.status();
    if (published->owner == MountOwner::kOurs || published->owner == MountOwner::kCovered) {
      return error(Code::kFailedPrecondition,
                   "volume \"{}\" is still published at \"{}\"; unpublish it first",
                   request.volume_id(), publication.target_path);
    }
    // The target was unmounted behind our back: the record is stale (and whatever else is
    // mounted there now is not ours to touch).
    ROSETCTL_RETURN_IF_ERROR(context_.store.delete_node_publication(publication.target_path));
  }
  ROSETCTL_RETURN_IF_ERROR(refuse_foreign_mount(*judged, request.volume_id(), "staging", *staging));

  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  // Also when the mount is already gone: the provider may still hold something for it (a loop
  // device attached before a crash), and unstaging what is not mounted is fine by contract.
  ROSETCTL_RETURN_IF_ERROR((*node)->unstage_volume(request.volume_id(), *staging));
  if ((*record)->created_dir) ROSETCTL_RETURN_IF_ERROR(remove_directory(*staging));
  return context_.store.delete_staging(request.volume_id(), *staging);
}

// ---------------------------------------------------------------- gRPC entry points

grpc::ServerUnaryReactor* NodeService::NodeStageVolume(
    Request* call, const csi::v1::NodeStageVolumeRequest* request,
    csi::v1::NodeStageVolumeResponse* response) {
  return answer(handlers_, call, "NodeStageVolume", request, response,
                [=, this] { return stage_volume(*request); });
}

grpc::ServerUnaryReactor* NodeService::NodeUnstageVolume(
    Request* call, const csi::v1::NodeUnstageVolumeRequest* request,
    csi::v1::NodeUnstageVolumeResponse* response) {
  return answer(handlers_, call, "NodeUnstageVolume", request, response,
                [=, this] { return unstage_volume(*request); });
}

grpc::ServerUnaryReactor* NodeService::NodePublishVolume(
    Request* call, const csi::v1::NodePublishVolumeRequest* request,
    csi::v1::NodePublishVolumeResponse* response) {
  return answer(handlers_, call, "NodePublishVolume", request, response,
                [=, this] { return publish_volume(*request); });
}

grpc::ServerUnaryReactor* NodeService::NodeUnpublishVolume(
    Request* call, const csi::v1::NodeUnpublishVolumeRequest* request,
    csi::v1::NodeUnpublishVolumeResponse* response) {
  return answer(handlers_, call, "NodeUnpublishVolume", request, response,
                [=, this] { return unpublish_volume(*request); });
}

grpc::ServerUnaryReactor* NodeService::NodeGetVolumeStats(
    Request* call, const csi::v1::NodeGetVolumeStatsRequest* request,
    csi::v1::NodeGetVolumeStatsResponse* response) {
  return answer(handlers_, call, "NodeGetVolumeStats", request, response,
                [=, this] { return volume_stats(*request, response); });
}

grpc::ServerUnaryReactor* NodeService::NodeExpandVolume(
    Request* call, const csi::v1::NodeExpandVolumeRequest* request,
    csi::v1::NodeExpandVolumeResponse* response) {
  return answer(handlers_, call, "NodeExpandVolume", request, response,
                [=, this] { return expand_volume(*request, response); });
}

grpc::ServerUnaryReactor* NodeService::NodeGetCapabilities(
    Request* call, const csi::v1::NodeGetCapabilitiesRequest* request,
    csi::v1::NodeGetCapabilitiesResponse* response) {
  return answer_now(call, "NodeGetCapabilities", request, response, [&] {
    using Rpc = csi::v1::NodeServiceCapability::RPC;
    for (auto type : {Rpc::STAGE_UNSTAGE_VOLUME, Rpc::GET_VOLUME_STATS, Rpc::VOLUME_CONDITION,
                      Rpc::EXPAND_VOLUME}) {
      response->add_capabilities()->mutable_rpc()->set_type(type);
    }
    return Status::ok();
  });
}

grpc::ServerUnaryReactor* NodeService::NodeGetInfo(Request* call,
                                                   const csi::v1::NodeGetInfoRequest* request,
                                                   csi::v1::NodeGetInfoResponse* response) {
  return answer_now(call, "NodeGetInfo", request, response, [&] {
    response->set_node_id(context_.options.node_id);
    response->set_max_volumes_per_node(context_.options.max_volumes_per_node);
    (*response->mutable_accessible_topology()->mutable_segments())[kTopologyNodeKey] =
        context_.options.node_id;
    return Status::ok();
  });
}

}  // namespace rosetctl
