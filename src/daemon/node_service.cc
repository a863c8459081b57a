// Node RPCs. Each mutation writes its record first (the intent) and then mounts, so a crash
// in between leaves a record a retry completes, never a mount nobody knows about.
#include "daemon/node_service.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstring>

#include "cluster/node_forward.h"
#include "core/loop_device.h"
#include "core/mount_ops.h"
#include "core/validate.h"
#include "daemon/call_log.h"
#include "daemon/convert.h"
#include "daemon/csi_secrets.h"
#include "daemon/node_mounts.h"
#include "daemon/node_paths.h"
#include "daemon/node_repair.h"
#include "daemon/publish_secrets.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {
namespace {

// Bytes and inodes of the filesystem at `path`, or the size of the block device there.
Status fill_usage(const std::string& path, csi::v1::NodeGetVolumeStatsResponse* response) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", path));
  }
  auto* bytes = response->add_usage();
  bytes->set_unit(csi::v1::VolumeUsage::BYTES);
  if (S_ISBLK(st.st_mode)) {  // a raw block volume: only its size is known
    auto size = block_device_size(path);
    if (!size) return size.status();
    bytes->set_total(*size);
    return Status::ok();
  }
  struct statvfs fs;
  if (::statvfs(path.c_str(), &fs) != 0) {
    return errno_status(errno, fmt::format("cannot statfs \"{}\"", path));
  }
  auto unit = static_cast<int64_t>(fs.f_frsize);
  bytes->set_total(static_cast<int64_t>(fs.f_blocks) * unit);
  bytes->set_available(static_cast<int64_t>(fs.f_bavail) * unit);
  bytes->set_used(static_cast<int64_t>(fs.f_blocks - fs.f_bfree) * unit);
  auto* inodes = response->add_usage();
  inodes->set_unit(csi::v1::VolumeUsage::INODES);
  inodes->set_total(static_cast<int64_t>(fs.f_files));
  inodes->set_available(static_cast<int64_t>(fs.f_favail));
  inodes->set_used(static_cast<int64_t>(fs.f_files - fs.f_ffree));
  return Status::ok();
}

Expected<Capability> required_capability(bool present, const csi::v1::VolumeCapability& proto) {
  if (!present) return error(Code::kInvalidArgument, "volume_capability is required");
  return capability_from_proto(proto, "volume_capability");
}

// The spec's "exceeds capabilities" (FAILED_PRECONDITION): mount access to a block volume or the
// reverse. Only checkable where the volume record lives on this host (`record`, else null).
Status check_access_type(std::string_view volume_id, const VolumeRecord* record,
                         const Capability& capability) {
  if (!record) return Status::ok();
  std::string_view wanted = capability.access_type == AccessType::kBlock ? "block" : "mount";
  if (record->access_type != wanted) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is a {} volume; it cannot be used for {} access", volume_id,
                 record->access_type, wanted);
  }
  return Status::ok();
}

Status check_access_type(const ServiceContext& context, std::string_view volume_id,
                         const Capability& capability) {
  auto record = context.store.find_volume(volume_id);
  if (!record) return record.status();
  return check_access_type(volume_id, record->has_value() ? &**record : nullptr, capability);
}

// For unstage/unpublish: a path that no longer exists (kubelet may have removed its parent)
// cannot be mounted, so its normalised form is enough to find and drop our records.
Expected<std::string> path_to_release(const StateLayout& layout, std::string_view path,
                                      std::string_view field, const std::string& allowed) {
  auto checked = checked_mount_path(layout, path, field, allowed);
  if (checked || checked.status().code() != Code::kInvalidArgument) return checked;
  auto normal = normalize_absolute_path(path, field);
  if (!normal) return normal.status();
  struct stat st;
  if (::lstat(normal->c_str(), &st) == 0 || errno != ENOENT) return checked.status();
  return normal;
}

}  // namespace

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
  auto stage_lock =
      context_.locks.try_lock(stage_lock_key(request.volume_id()), LockMode::kExclusive,
                              busy_message(fmt::format("volume \"{}\"", request.volume_id())));
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
  auto stage_lock =
      context_.locks.try_lock(stage_lock_key(request.volume_id()), LockMode::kExclusive,
                              busy_message(fmt::format("volume \"{}\"", request.volume_id())));
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

// ---------------------------------------------------------------- publish / unpublish

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
  auto stage_lock =
      context_.locks.try_lock(stage_lock_key(request.volume_id()), LockMode::kShared,
                              busy_message(fmt::format("volume \"{}\"", request.volume_id())));
  if (!stage_lock) return stage_lock.status();
  auto target_lock = context_.locks.try_lock(target_lock_key(*target), LockMode::kExclusive,
                                             busy_message(fmt::format("target \"{}\"", *target)));
  if (!target_lock) return target_lock.status();

  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  // Read once for every check below and the provider's publish.
  auto volume = context_.store.find_volume(request.volume_id());
  if (!volume) return volume.status();
  const VolumeRecord* volume_here = volume->has_value() ? &**volume : nullptr;
  ROSETCTL_RETURN_IF_ERROR((*node)->check_volume_on_node_given(request.volume_id(), volume_here));
  ROSETCTL_RETURN_IF_ERROR(check_access_type(request.volume_id(), volume_here, *capability));
  ROSETCTL_RETURN_IF_ERROR(refuse_moving_volume(context_, request.volume_id()));

  auto staged = context_.store.find_staging(request.volume_id(), *staging);
  if (!staged) return staged.status();
  if (!staged->has_value()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is not staged at \"{}\"; call NodeStageVolume first",
                 request.volume_id(), *staging);
  }
  auto staging_mount = judge_staging(context_.store, *staging, &**staged);
  if (!staging_mount) return staging_mount.status();
  if (!staging_mount->top) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is not staged at \"{}\"; call NodeStageVolume first",
                 request.volume_id(), *staging);
  }
  ROSETCTL_RETURN_IF_ERROR(
      refuse_foreign_mount(*staging_mount, request.volume_id(), "staging", *staging));

  auto repaired = repair_dead_staging(context_, **node, request.volume_id(), *staging,
                                      PublicationCheck::kUnlessCheckedAtThisMount);
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
  auto existing = context_.store.find_node_publication(*target);
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

// ---------------------------------------------------------------- stats and info

Status NodeService::volume_stats(const csi::v1::NodeGetVolumeStatsRequest& request,
                                 csi::v1::NodeGetVolumeStatsResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  if (request.volume_path().empty())
    return error(Code::kInvalidArgument, "volume_path is required");
  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  ROSETCTL_RETURN_IF_ERROR((*node)->check_volume_on_node(request.volume_id()));
  // Only a path where this node staged or published this volume has its stats (spec: NOT_FOUND
  // when the volume is not at volume_path).
  auto path = normalize_absolute_path(request.volume_path(), "volume_path");
  Status not_here = error(Code::kNotFound, "volume \"{}\" is not staged or published at {}",
                          request.volume_id(), display_quoted(request.volume_path()));
  if (!path) return not_here;
  auto canonical = canonical_mount_path(*path, "volume_path");
  if (!canonical) return not_here;
  auto published = context_.store.find_node_publication(*canonical);
  if (!published) return published.status();
  auto staged = context_.store.find_staging(request.volume_id(), *canonical);
  if (!staged) return staged.status();
  bool ours = (published->has_value() && (*published)->volume_id == request.volume_id()) ||
              staged->has_value();
  if (!ours) return not_here;
  path = *canonical;

  int err = 0;
  PathHealth health = probe_path(*path, &err);
  if (health == PathHealth::kMissing) {
    return error(Code::kNotFound, "volume_path \"{}\" does not exist", *path);
  }
  auto* condition = response->mutable_volume_condition();
  if (health != PathHealth::kOk) {
    condition->set_abnormal(true);
    condition->set_message(fmt::format("\"{}\" is not accessible: {}", *path, std::strerror(err)));
    return Status::ok();
  }
  // Usage of the directory underneath, or of someone else's mount, would describe the wrong
  // filesystem.
  RecordedMount recorded = published->has_value() && (*published)->volume_id == request.volume_id()
                               ? (*published)->mount
                               : (*staged)->mount;
  std::string problem = recorded_mount_problem(*path, recorded);
  if (!problem.empty()) {
    condition->set_abnormal(true);
    condition->set_message(problem);
    return Status::ok();
  }
  ROSETCTL_RETURN_IF_ERROR(fill_usage(*path, response));
  VolumeCondition health_here = (*node)->node_condition(request.volume_id());
  condition->set_abnormal(health_here.abnormal);
  condition->set_message(health_here.abnormal ? health_here.message : "volume is healthy");
  return Status::ok();
}

// ---------------------------------------------------------------- expand

Status NodeService::expand_volume(const csi::v1::NodeExpandVolumeRequest& request,
                                  csi::v1::NodeExpandVolumeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  if (request.volume_path().empty())
    return error(Code::kInvalidArgument, "volume_path is required");
  // An unknown volume is NOT_FOUND before anything about the path is judged (csi-sanity asks
  // for NOT_FOUND with a relative path and an unknown id).
  auto owner = context_.providers.node_for_volume(request.volume_id());
  if (!owner) return owner.status();
  ROSETCTL_RETURN_IF_ERROR((*owner)->check_volume_on_node(request.volume_id()));
  auto path = normalize_absolute_path(request.volume_path(), "volume_path");
  if (!path) {
    return error(Code::kNotFound, "volume \"{}\" is not at {}", request.volume_id(),
                 display_quoted(request.volume_path()));
  }
  std::string staging;
  if (!request.staging_target_path().empty()) {
    auto normal = normalize_absolute_path(request.staging_target_path(), "staging_target_path");
    if (!normal) return normal.status();
    staging = *normal;
  }
  if (request.capacity_range().required_bytes() < 0) {
    return error(Code::kInvalidArgument, "capacity_range.required_bytes must not be negative");
  }

  // Exclusive with stage/unstage: the device and filesystem must stay put while they grow.
  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  auto stage_lock =
      context_.locks.try_lock(stage_lock_key(request.volume_id()), LockMode::kExclusive,
                              busy_message(fmt::format("volume \"{}\"", request.volume_id())));
  if (!stage_lock) return stage_lock.status();

  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  ROSETCTL_RETURN_IF_ERROR((*node)->check_volume_on_node(request.volume_id()));
  if (probe_path(*path) == PathHealth::kMissing) {
    return error(Code::kNotFound, "volume_path \"{}\" does not exist", *path);
  }
  NodeExpandSpec spec{request.volume_id(), *path, staging,
                      request.capacity_range().required_bytes()};
  auto capacity = (*node)->expand_on_node(spec);
  if (!capacity) return capacity.status();
  response->set_capacity_bytes(*capacity);
  return Status::ok();
}

// ---------------------------------------------------------------- gRPC entry points

// Calls naming another node are forwarded there (node_forward.h): never answered from here.
constexpr std::string_view kNodeService = "csi.v1.Node";

grpc::ServerUnaryReactor* NodeService::NodeStageVolume(
    Request* call, const csi::v1::NodeStageVolumeRequest* request,
    csi::v1::NodeStageVolumeResponse* response) {
  return answer_or_forward(context_, &handlers_, call, kNodeService, "NodeStageVolume", request,
                           response, [=, this] { return stage_volume(*request); });
}

grpc::ServerUnaryReactor* NodeService::NodeUnstageVolume(
    Request* call, const csi::v1::NodeUnstageVolumeRequest* request,
    csi::v1::NodeUnstageVolumeResponse* response) {
  return answer_or_forward(context_, &handlers_, call, kNodeService, "NodeUnstageVolume", request,
                           response, [=, this] { return unstage_volume(*request); });
}

grpc::ServerUnaryReactor* NodeService::NodePublishVolume(
    Request* call, const csi::v1::NodePublishVolumeRequest* request,
    csi::v1::NodePublishVolumeResponse* response) {
  return answer_or_forward(context_, &handlers_, call, kNodeService, "NodePublishVolume", request,
                           response, [=, this] { return publish_volume(*request); });
}

grpc::ServerUnaryReactor* NodeService::NodeUnpublishVolume(
    Request* call, const csi::v1::NodeUnpublishVolumeRequest* request,
    csi::v1::NodeUnpublishVolumeResponse* response) {
  return answer_or_forward(context_, &handlers_, call, kNodeService, "NodeUnpublishVolume", request,
                           response, [=, this] { return unpublish_volume(*request); });
}

grpc::ServerUnaryReactor* NodeService::NodeGetVolumeStats(
    Request* call, const csi::v1::NodeGetVolumeStatsRequest* request,
    csi::v1::NodeGetVolumeStatsResponse* response) {
  return answer_or_forward(context_, &handlers_, call, kNodeService, "NodeGetVolumeStats", request,
                           response, [=, this] { return volume_stats(*request, response); });
}

grpc::ServerUnaryReactor* NodeService::NodeExpandVolume(
    Request* call, const csi::v1::NodeExpandVolumeRequest* request,
    csi::v1::NodeExpandVolumeResponse* response) {
  return answer_or_forward(context_, &handlers_, call, kNodeService, "NodeExpandVolume", request,
                           response, [=, this] { return expand_volume(*request, response); });
}

grpc::ServerUnaryReactor* NodeService::NodeGetCapabilities(
    Request* call, const csi::v1::NodeGetCapabilitiesRequest* request,
    csi::v1::NodeGetCapabilitiesResponse* response) {
  return answer_or_forward(context_, nullptr, call, kNodeService, "NodeGetCapabilities", request,
                           response, [&] {
                             using Rpc = csi::v1::NodeServiceCapability::RPC;
                             for (auto type : {Rpc::STAGE_UNSTAGE_VOLUME, Rpc::GET_VOLUME_STATS,
                                               Rpc::VOLUME_CONDITION, Rpc::EXPAND_VOLUME}) {
                               response->add_capabilities()->mutable_rpc()->set_type(type);
                             }
                             return Status::ok();
                           });
}

grpc::ServerUnaryReactor* NodeService::NodeGetInfo(Request* call,
                                                   const csi::v1::NodeGetInfoRequest* request,
                                                   csi::v1::NodeGetInfoResponse* response) {
  return answer_or_forward(
      context_, nullptr, call, kNodeService, "NodeGetInfo", request, response, [&] {
        response->set_node_id(context_.options.node_id);
        response->set_max_volumes_per_node(context_.options.max_volumes_per_node);
        (*response->mutable_accessible_topology()->mutable_segments())[kTopologyNodeKey] =
            context_.options.node_id;
        return Status::ok();
      });
}

}  // namespace rosetctl
