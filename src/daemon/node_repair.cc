// Reviving dead stagings and the publications bound from them.
#include "daemon/node_repair.h"

#include <spdlog/spdlog.h>

#include "core/mount_ops.h"
#include "daemon/convert.h"
#include "daemon/node_mounts.h"

namespace rosetctl {

bool is_dead_mount(const std::string& path) {
  return probe_path(path) == PathHealth::kDisconnected;
}

Expected<bool> repair_dead_staging(ServiceContext& context, NodeSide& node,
                                   std::string_view volume_id, const std::string& staging_path) {
  if (!is_dead_mount(staging_path)) return false;
  spdlog::warn("volume \"{}\": staging \"{}\" does not answer (dead mount); repairing it",
               volume_id, staging_path);
  ROSETCTL_RETURN_IF_ERROR(node.revive_staging(volume_id, staging_path)
                               .with_context(fmt::format("volume \"{}\"", volume_id)));
  ROSETCTL_RETURN_IF_ERROR(
      context.store.set_staging_mount(volume_id, staging_path, record_mount_at(staging_path)));
  auto record = context.store.find_volume(volume_id);
  if (!record || !record->has_value()) return true;
  auto publications = context.store.node_publications_of_staging(volume_id, staging_path);
  if (!publications) return publications.status();
  for (const NodePublication& publication : *publications) {
    if (!is_dead_mount(publication.target_path)) continue;
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
    PublishSpec spec{std::string(volume_id),  staging_path,
                     publication.target_path, *capability,
                     publication.readonly,    (*record)->context};
    if (Status bound = node.publish_volume(spec); !bound) {
      return bound.with_context(fmt::format("volume \"{}\": cannot bind \"{}\" again", volume_id,
                                            publication.target_path));
    }
    ROSETCTL_RETURN_IF_ERROR(context.store.set_node_publication_mount(
        publication.target_path, record_mount_at(publication.target_path)));
    spdlog::info("volume \"{}\": bound \"{}\" again", volume_id, publication.target_path);
  }
  return true;
}

}  // namespace rosetctl
