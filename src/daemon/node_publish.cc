// NodePublishVolume and NodeUnpublishVolume of this host (node_service.h): a staged volume bound
// at a target, the record written before the mount, as for staging.
#include <spdlog/spdlog.h>

#include "core/mount_ops.h"
#include "core/validate.h"
#include "daemon/call_log.h"
#include "daemon/convert.h"
#include "daemon/csi_secrets.h"
#include "daemon/node_checks.h"
#include "daemon/node_mounts.h"
#include "daemon/node_paths.h"
#include "daemon/node_repair.h"
#include "daemon/node_service.h"
#include "daemon/publish_secrets.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {

Status NodeService::publish_volume(const csi::v1::NodePublishVolumeRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  if (request.target_path().empty())
    return error(Code::kInvalidArgument, "target_path is required");
  auto capability =
      required_capability(request.has_volume_capability(), request.volume_capability());
  if (!capability) return capability.status();
  // The spec's code for a missing staging path when STAGE_UNSTAGE_VOLUME is advertised.
  if (request.staging_target_path().empty()) {
    return error(Code::kFailedPrecondition,
                 "staging_target_path is required: this plugin stages volumes (NodeStageVolume) "
                 "before publishing them");
  }
  auto staging = checked_mount_path(context_.layout, request.staging_target_path(),
                                    "staging_target_path", context_.layout.staging_dir());
  if (!staging) return staging.status();
  auto target = checked_mount_path(context_.layout, request.target_path(), "target_path",
                                   context_.layout.mounts_dir());
  if (!target) return target.status();
  if (path_is_within(*target, *staging) || path_is_within(*staging, *target)) {
    return error(Code::kInvalidArgument,
                 "target_path \"{}\" and staging_target_path \"{}\" overlap", *target, *staging);
  }

  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  auto stage_lock = try_lock_stage(context_.locks, request.volume_id(), LockMode::kShared);
  if (!stage_lock) return stage_lock.status();
  auto target_lock = context_.locks.try_lock(target_lock_key(*target), LockMode::kExclusive,
                                             busy_message(fmt::format("target \"{}\"", *target)));
  if (!target_lock) return target_lock.status();

  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  // The volume, its move, the staging and the target's publication, read once under the locks
  // from one snapshot for every check below and the provider's publish.
  auto state = context_.store.node_publish_state(request.volume_id(), *staging, *target);
  if (!state) return state.status();
  const VolumeRecord* volume_here = state->volume ? &*state->volume : nullptr;
  ROSETCTL_RETURN_IF_ERROR((*node)->check_volume_on_node_given(request.volume_id(), volume_here));
  ROSETCTL_RETURN_IF_ERROR(check_access_type(request.volume_id(), volume_here, *capability));
  ROSETCTL_RETURN_IF_ERROR(refuse_move(request.volume_id(), state->move ? &*state->move : nullptr));

  if (!state->staging) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is not staged at \"{}\"; call NodeStageVolume first",
                 request.volume_id(), *staging);
  }
  auto staging_mount = judge_staging(context_.store, *staging, &*state->staging);
  if (!staging_mount) return staging_mount.status();
  if (!staging_mount->top) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is not staged at \"{}\"; call NodeStageVolume first",
                 request.volume_id(), *staging);
  }
  ROSETCTL_RETURN_IF_ERROR(
      refuse_foreign_mount(*staging_mount, request.volume_id(), "staging", *staging));

  bool records_changed = false;
  auto repaired =
      repair_dead_staging(context_, **node, request.volume_id(), *staging,
                          PublicationCheck::kUnlessCheckedAtThisMount, &records_changed);
  if (!repaired) return repaired.status();
  if (*repaired) {  // mounted anew
    ROSETCTL_RETURN_IF_ERROR(
        context_.store.set_staging_mount(request.volume_id(), *staging, record_mount_at(*staging)));
    staging_mount = judge_mount(*staging, RecordedMount{});
    if (!staging_mount) return staging_mount.status();
    if (!staging_mount->top) {
      return error(Code::kFailedPrecondition, "volume \"{}\" is no longer staged at \"{}\"",
                   request.volume_id(), *staging);
    }
  }
  // The repair may have bound this target again and recorded its new mount: read it anew then.
  Expected<std::optional<NodePublication>> existing = std::move(state->publication);
  if (records_changed || *repaired) existing = context_.store.find_node_publication(*target);
  if (!existing) return existing.status();
  bool recorded_here = existing->has_value() && (*existing)->volume_id == request.volume_id();
  auto target_mount =
      judge_publication(context_.store, *target, recorded_here ? &**existing : nullptr);
  if (!target_mount) return target_mount.status();
  // A target of ours still bound to a dead mount (its staging was revived without this host's
  // record of the volume) is bound again below.
  if (target_mount->top && recorded_here && target_mount->owner == MountOwner::kOurs &&
      is_dead_mount(*target)) {
    ROSETCTL_RETURN_IF_ERROR(unmount_topmost(*target));
    target_mount->top.reset();
  }

  std::string key = capability_key(*capability);
  // A block volume's target is a file bound to a device node inside the staging mount, so it
  // shows the staging's filesystem with another root.
  bool block = capability->access_type == AccessType::kBlock;
  if (target_mount->top) {
    const MountEntry& bound = *target_mount->top;
    const MountEntry& staged_at = *staging_mount->top;
    bool same = block ? bound.major == staged_at.major && bound.minor == staged_at.minor
                      : same_source(bound, staged_at);
    // Recorded with its mount id: that id decides; recorded before ids were: the source does.
    bool ours = recorded_here && target_mount->owner == MountOwner::kOurs &&
                ((*existing)->mount.id != 0 || same);
    if (!ours) {
      return error(Code::kAlreadyExists, "target_path \"{}\" already has another mount", *target);
    }
    if ((*existing)->readonly != request.readonly() || (*existing)->capability != key) {
      return error(Code::kAlreadyExists,
                   "volume \"{}\" is already published at \"{}\" with a different capability or "
                   "read-only flag",
                   request.volume_id(), *target);
    }
    return Status::ok();
  }
  if (existing->has_value() && (*existing)->volume_id != request.volume_id()) {
    return error(Code::kAlreadyExists, "target_path \"{}\" is recorded for volume \"{}\"", *target,
                 (*existing)->volume_id);
  }

  ROSETCTL_RETURN_IF_ERROR(block ? check_block_target(*target) : check_publish_target(*target));
  auto created =
      block ? ensure_file(*target, "target_path") : ensure_directory(*target, "target_path");
  if (!created) return created.status();
  NodePublication publication{request.volume_id(),
                              *target,
                              *staging,
                              request.readonly(),
                              key,
                              *created || (existing->has_value() && (*existing)->created_target),
                              {},
                              to_map(request.volume_context())};
  // The record is written once, when the bind is built and not yet attached: it exists before
  // the mount does and already names it. Only when the bind could not be described then (no
  // unique ids, or a source inside its mount) is its identity added after the attach.
  bool recorded = false;
  bool identified = false;
  PublishSpec spec{request.volume_id(), *staging,           *target,
                   *capability,         request.readonly(), to_map(request.volume_context()),
                   volume_here};
  spec.before_attach = [&](const RecordedMount& mount) {
    publication.mount = mount;
    identified = mount.id != 0 && !mount.fingerprint.empty();
    Status written = context_.store.upsert_node_publication(publication);
    recorded = written.is_ok();
    return written;
  };
  if (Status status = (*node)->publish_volume(spec); !status) {
    (void)context_.store.delete_node_publication(*target);
    if (publication.created_target) (void)remove_target(*target);
    return status;
  }
  if (!recorded) {  // a provider that mounted without bind_mount's before_attach: a bug
    spdlog::error("volume \"{}\": provider mounted \"{}\" before it was recorded",
                  request.volume_id(), *target);
    publication.mount = record_mount_at(*target);
    return context_.store.upsert_node_publication(publication);
  }
  if (identified) return Status::ok();
  return context_.store.set_node_publication_mount(*target, record_mount_at(*target));
}

Status NodeService::unpublish_volume(const csi::v1::NodeUnpublishVolumeRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  auto target = path_to_release(context_.layout, request.target_path(), "target_path",
                                context_.layout.mounts_dir());
  if (!target) return target.status();

  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  auto target_lock = context_.locks.try_lock(target_lock_key(*target), LockMode::kExclusive,
                                             busy_message(fmt::format("target \"{}\"", *target)));
  if (!target_lock) return target_lock.status();

  auto record = context_.store.find_node_publication(*target);
  if (!record) return record.status();
  bool recorded_here = record->has_value() && (*record)->volume_id == request.volume_id();
  auto judged = judge_publication(context_.store, *target, recorded_here ? &**record : nullptr);
  if (!judged) return judged.status();
  if (!recorded_here) {
    if (judged->top) {
      return error(Code::kFailedPrecondition,
                   "\"{}\" is mounted but is not a publication of volume \"{}\"; not touching it",
                   *target, request.volume_id());
    }
    auto node = context_.providers.node_for_volume(request.volume_id());
    if (!node) return node.status();
    return (*node)->check_volume_on_node(request.volume_id());  // NOT_FOUND or already done
  }
  ROSETCTL_RETURN_IF_ERROR(
      refuse_foreign_mount(*judged, request.volume_id(), "publication", *target));

  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  if (judged->owner == MountOwner::kOurs)
    ROSETCTL_RETURN_IF_ERROR((*node)->unpublish_volume(request.volume_id(), *target));
  if ((*record)->created_target) ROSETCTL_RETURN_IF_ERROR(remove_target(*target));
  return context_.store.delete_node_publication(*target);
}

}  // namespace rosetctl
