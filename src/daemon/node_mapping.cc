// Mapping volumes to nodes through their provider; see node_mapping.h.
#include "daemon/node_mapping.h"

#include "core/call_scope.h"

namespace rosetctl {

Expected<StringMap> map_volume_to_node(const LoadedVolume& volume, const NodeRecord& node,
                                       const StringMap& secrets) {
  auto controller = controller_side(*volume.provider);
  if (!controller) return controller.status();
  return (*controller)->map_to_node(volume.record, node, secrets);
}

Status unmap_volume_from_node(const LoadedVolume& volume, const NodeRecord& node) {
  auto controller = controller_side(*volume.provider);
  if (!controller) return controller.status();
  return (*controller)->unmap_from_node(volume.record, node);
}

Expected<std::vector<std::string>> move_node_mappings(const ServiceContext& context,
                                                      const NodeRecord& before,
                                                      const NodeRecord& now) {
  std::vector<std::string> closed;
  auto publications = context.store.controller_publications_on_node(now.node_id);
  if (!publications) return publications.status();
  for (const ControllerPublication& publication : *publications) {
    ROSETCTL_RETURN_IF_ERROR(check_current_call());
    auto volume = load_volume(context, publication.volume_id);
    if (!volume) return volume.status();
    std::string what = fmt::format("moving volume \"{}\" to node \"{}\"'s new iSCSI initiator name",
                                   volume->record.name, now.node_id);
    if (!now.iscsi_initiator.empty()) {
      auto mapped = map_volume_to_node(*volume, now, {});
      if (!mapped && mapped.status().code() != Code::kFailedPrecondition) {
        return mapped.status().with_context(what);
      }
      if (!mapped) closed.push_back(mapped.status().message());
    }
    if (!before.iscsi_initiator.empty()) {
      // Only the old name goes, not the node's publication: a record of the name alone (no node
      // id), so that what the provider keeps for the node (its CHAP account) stays.
      NodeRecord old_name;
      old_name.iscsi_initiator = before.iscsi_initiator;
      ROSETCTL_RETURN_IF_ERROR(unmap_volume_from_node(*volume, old_name).with_context(what));
    }
  }
  return closed;
}

}  // namespace rosetctl
