// Reviving dead stagings and the publications bound from them.
#include "daemon/node_repair.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "core/mount_ops.h"
#include "core/mount_point.h"
#include "daemon/convert.h"
#include "daemon/metrics.h"
#include "daemon/node_mounts.h"
#include "daemon/reconcile.h"

namespace rosetctl {
namespace {

// Binds again each publication of the staging that does not answer (the staging answers now).
// True when every one answered (nothing was dead).
Expected<bool> rebind_dead_publications(ServiceContext& context, NodeSide& node,
                                        std::string_view volume_id,
                                        const std::string& staging_path) {
  auto publications = context.store.node_publications_of_staging(volume_id, staging_path);
  if (!publications) return publications.status();
  std::optional<VolumeRecord> record;
  bool all_answered = true;
  bool looked = false;
  for (const NodePublication& publication : *publications) {
    if (!is_dead_mount(publication.target_path)) continue;
    all_answered = false;
    if (!looked) {
      // The volume record is there where one state serves CLI and node (a host); a Kubernetes
      // node plugin's state is its own (the controller keeps the volumes): no record then.
      auto found = context.store.find_volume(volume_id);
      if (!found) return found.status();
      if (found->has_value()) record = std::move(**found);
      looked = true;
    }
    auto judged = judge_mount(publication.target_path, publication.mount);
    if (!judged) return judged.status();
    if (judged->owner != MountOwner::kOurs) {
      spdlog::warn("volume \"{}\": not binding \"{}\" again: {}", volume_id,
                   publication.target_path,
                   recorded_mount_problem(publication.target_path, publication.mount));
      continue;
    }
    auto capability = capability_from_key(publication.capability);
    if (!capability) return capability.status();
    ROSETCTL_RETURN_IF_ERROR(unmount_topmost(publication.target_path));
    // What NodePublish was given; rows from before schema 11 have none, the volume record has it.
    const StringMap& volume_context =
        publication.volume_context.empty() && record ? record->context : publication.volume_context;
    PublishSpec spec{std::string(volume_id), staging_path,  publication.target_path, *capability,
                     publication.readonly,   volume_context};
    if (Status bound = node.publish_volume(spec); !bound) {
      return bound.with_context(fmt::format("volume \"{}\": cannot bind \"{}\" again", volume_id,
                                            publication.target_path));
    }
    ROSETCTL_RETURN_IF_ERROR(context.store.set_node_publication_mount(
        publication.target_path, record_mount_at(publication.target_path)));
    record_mount_repair(MountRepair::kPublication);
    spdlog::info("volume \"{}\": bound \"{}\" again", volume_id, publication.target_path);
  }
  return all_answered;
}

// Whether the staging or one of its recorded publications does not answer.
bool has_dead_mount(ServiceContext& context, const Staging& staging) {
  if (is_dead_mount(staging.staging_path)) return true;
  auto publications =
      context.store.node_publications_of_staging(staging.volume_id, staging.staging_path);
  if (!publications) return true;  // repair_dead_staging reports it
  for (const NodePublication& publication : *publications) {
    if (is_dead_mount(publication.target_path)) return true;
  }
  return false;
}

}  // namespace

bool is_dead_mount(const std::string& path) {
  return probe_path(path) == PathHealth::kDisconnected;
}

Expected<bool> repair_dead_staging(ServiceContext& context, NodeSide& node,
                                   std::string_view volume_id, const std::string& staging_path,
                                   PublicationCheck check, bool* records_changed) {
  if (records_changed != nullptr) *records_changed = false;
  bool dead = is_dead_mount(staging_path);
  // The staging's mount now, read before its publications are: what they were checked at.
  MountId checked_at = 0;
  if (!dead && check == PublicationCheck::kUnlessCheckedAtThisMount) {
    auto id = mount_id_at(staging_path);
    if (id && id->has_value()) checked_at = **id;
    if (context.checked_stagings.all_answered(staging_path, checked_at)) return false;
  }
  if (dead) {
    spdlog::warn("volume \"{}\": staging \"{}\" does not answer (dead mount); repairing it",
                 volume_id, staging_path);
    ROSETCTL_RETURN_IF_ERROR(node.revive_staging(volume_id, staging_path)
                                 .with_context(fmt::format("volume \"{}\"", volume_id)));
    ROSETCTL_RETURN_IF_ERROR(
        context.store.set_staging_mount(volume_id, staging_path, record_mount_at(staging_path)));
    record_mount_repair(MountRepair::kStaging);
  }
  // Also when the staging answers: its provider may have revived it already (roset's start-up
  // reconcile restarts roset-fuse and binds its stagings), leaving the pods' targets dead.
  auto all_answered = rebind_dead_publications(context, node, volume_id, staging_path);
  if (records_changed != nullptr) *records_changed = !all_answered || !*all_answered;
  if (!all_answered) return all_answered.status();
  if (*all_answered) context.checked_stagings.remember(staging_path, checked_at);
  return dead;
}

std::vector<std::string> repair_dead_mounts(ServiceContext& context) {
  std::vector<std::string> failed;
  auto stagings = context.store.all_stagings();
  if (!stagings) return {std::string(stagings.status().message())};
  for (const Staging& staging : *stagings) {
    if (!has_dead_mount(context, staging)) continue;  // the usual case: nothing to lock or ask
    auto node = context.providers.node_for_volume(staging.volume_id);
    if (!node) {
      failed.push_back(std::string(node.status().message()));
      continue;
    }
    auto held = lock_like_stage(context, staging.volume_id);
    if (!held) {
      failed.push_back(std::string(held.status().message()));  // a call works on it right now
      continue;
    }
    auto repaired = repair_dead_staging(context, **node, staging.volume_id, staging.staging_path);
    if (!repaired) failed.push_back(std::string(repaired.status().message()));
  }
  return failed;
}

}  // namespace rosetctl
