// Startup reconcile of node records and provider resources (see reconcile.h).
#include "daemon/reconcile.h"

#include <fmt/ranges.h>

#include "core/log.h"
#include "core/mountinfo.h"
#include "core/validate.h"
#include "daemon/node_paths.h"
#include "daemon/node_repair.h"
#include "daemon/volume_locks.h"

namespace rosetctl {

// The locks a NodeStage takes: whoever holds them is working on the volume right now.
Expected<std::vector<HeldLock>> lock_like_stage(const ServiceContext& context,
                                                std::string_view volume_id) {
  std::string busy = busy_message(fmt::format("volume \"{}\"", volume_id));
  std::vector<HeldLock> held;
  auto volume = context.locks.try_lock(volume_lock_key(volume_id), LockMode::kShared, busy);
  if (!volume) return volume.status();
  held.push_back(std::move(*volume));
  auto stage = context.locks.try_lock(stage_lock_key(volume_id), LockMode::kExclusive, busy);
  if (!stage) return stage.status();
  held.push_back(std::move(*stage));
  return held;
}

namespace {

// A staging record whose mount is gone (a crash between recording and mounting, or a reboot)
// is removed with its publications, unless one of those is still mounted: then a person
// should look, and unstage reports it.
Status forget_stale_staging(ServiceContext& context, const Staging& staging,
                            const MountTable& table) {
  auto publications =
      context.store.node_publications_of_staging(staging.volume_id, staging.staging_path);
  if (!publications) return publications.status();
  for (const NodePublication& publication : *publications) {
    if (table.find_by_target(publication.target_path) != nullptr) return Status::ok();
  }
  for (const NodePublication& publication : *publications) {
    ROSETCTL_RETURN_IF_ERROR(context.store.delete_node_publication(publication.target_path));
    if (publication.created_target)
      ROSETCTL_RETURN_IF_ERROR(remove_target(publication.target_path));
  }
  ROSETCTL_RETURN_IF_ERROR(context.store.delete_staging(staging.volume_id, staging.staging_path));
  if (staging.created_dir) ROSETCTL_RETURN_IF_ERROR(remove_directory(staging.staging_path));
  spdlog::warn(
      "reconcile: volume \"{}\" was recorded as staged at \"{}\" without a mount there; "
      "forgot that staging",
      staging.volume_id, staging.staging_path);
  return Status::ok();
}

Status forget_stale_stagings(ServiceContext& context) {
  auto volumes = context.store.list_volumes("", 0);
  if (!volumes) return volumes.status();
  for (const VolumeRecord& volume : *volumes) {
    auto stagings = context.store.stagings(volume.id);
    if (!stagings) return stagings.status();
    if (stagings->empty()) continue;
    auto held = lock_like_stage(context, volume.id);
    if (!held) continue;              // in use right now: whatever is happening will finish the job
    auto table = MountTable::read();  // after locking, so no stage of it is half-way
    if (!table) return table.status();
    for (const Staging& staging : *stagings) {
      if (table->find_by_target(staging.staging_path) != nullptr) continue;
      ROSETCTL_RETURN_IF_ERROR(forget_stale_staging(context, staging, *table));
    }
  }
  return Status::ok();
}

}  // namespace

Status reconcile_node(ServiceContext& context) {
  ROSETCTL_RETURN_IF_ERROR(forget_stale_stagings(context));
  VolumeLocker locker = [&context](std::string_view volume_id) {
    return lock_like_stage(context, volume_id);
  };
  for (const std::string& name : context.providers.names()) {
    auto provider = context.providers.by_name(name);
    if (!provider) return provider.status();
    NodeSide* node = (*provider)->node();
    if (node == nullptr) continue;  // nothing of it on this node
    Status status = node->reconcile_node(locker);
    if (!status) return status.with_context(fmt::format("reconcile of provider \"{}\"", name));
  }
  // After the providers: roset's has started roset-fuse again and bound its stagings, and the
  // pods' targets, still bound to the dead mounts, follow here (kubelet never republishes).
  std::vector<std::string> failed = repair_dead_mounts(context);
  for (const std::string& failure : failed)
    spdlog::warn("reconcile: a dead mount is left: {}", escape_text(failure));
  if (!failed.empty()) {
    return error(Code::kInternal, "dead mounts could not be repaired: {}", fmt::join(failed, "; "));
  }
  return Status::ok();
}

void reconcile_controller(ServiceContext& context) {
  for (const std::string& name : context.providers.names()) {
    auto provider = context.providers.by_name(name);
    if (!provider) continue;
    ControllerSide* controller = (*provider)->controller();
    if (controller == nullptr) continue;
    if (Status status = controller->reconcile_controller(); !status) {
      spdlog::error("startup reconcile of provider \"{}\" failed: {}", name,
                    escape_text(status.message()));
    }
  }
}

}  // namespace rosetctl
