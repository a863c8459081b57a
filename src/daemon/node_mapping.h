// Mapping volumes to nodes through their provider (ControllerSide::map_to_node and
// unmap_from_node): the one path ControllerPublishVolume, ControllerUnpublishVolume and a node
// that registers again under another iSCSI initiator name all take, so there is one way a
// node's name gets on (and off) a volume's ACL.
#pragma once

#include <string>
#include <vector>

#include "core/state_store.h"
#include "core/status.h"
#include "daemon/service_context.h"
#include "daemon/volume_lookup.h"

namespace rosetctl {

// Lets `node` reach the volume; what the node needs to attach it (the publish context's part).
Expected<StringMap> map_volume_to_node(const LoadedVolume& volume, const NodeRecord& node,
                                       const StringMap& secrets);
// The reverse; idempotent.
Status unmap_volume_from_node(const LoadedVolume& volume, const NodeRecord& node);

// A node's initiator name changes from `before`'s to `now`'s (either may be ""): each volume
// published to the node is mapped to `now` (the new name gets in) and then unmapped from
// `before` (the old name loses access and its sessions), with no secrets: a volume mapped with
// CHAP keeps its account, or stays closed to the new name when its target lost it (a line of
// the result says so). Any other failure stops the move and is returned. The caller holds the
// node's lock exclusively, so no publication comes or goes meanwhile, and records `now` only
// after this succeeded, so a move stopped half-way is made again in full by the node's next
// registration (every step is idempotent).
Expected<std::vector<std::string>> move_node_mappings(const ServiceContext& context,
                                                      const NodeRecord& before,
                                                      const NodeRecord& now);

}  // namespace rosetctl
