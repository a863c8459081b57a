// Where a CSI Controller call goes (cluster/routing_controller.h): the decisions alone, made from
// the request and this host's node id, so that they are tested without any node
// (tests/unit/cluster/routing_test.cc). The calls themselves are the routing controller's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/placed_id.h"
#include "core/status.h"
#include "csi.pb.h"

namespace rosetctl {

// The node a call on `id` (a volume or snapshot id) is forwarded to: the node its placed id
// names, when that is not `own`; nullopt: this host answers.
std::optional<std::string> node_of_id(std::string_view id, std::string_view own);

// The first `topology.rosetctl.io/node` segment of the preferred topologies, else of the
// requisite ones. Only the first, never a fallback: the same request then always goes to the
// same node, whose own name idempotency answers a repeated CreateVolume, across controller
// restarts and with no record on the controller to go stale.
std::optional<std::string> requested_node(const csi::v1::TopologyRequirement& requirement);

// Every `topology.rosetctl.io/node` segment of the preferred topologies, then of the requisite
// ones, each once: the nodes a placement may choose among, in the order it tries them.
std::vector<std::string> requested_nodes(const csi::v1::TopologyRequirement& requirement);

// `request` with only `node`'s topology (as the request gave it, else the node's own segment),
// both preferred and requisite: a create placed on `node` past cordoned ones.
csi::v1::CreateVolumeRequest narrowed_to_node(const csi::v1::CreateVolumeRequest& request,
                                              const std::string& node);

// RESOURCE_EXHAUSTED (CSI: the volume cannot be provisioned in the topology asked for): `node`
// is cordoned, and how to uncordon it.
Status cordoned_error(std::string_view node);

// The node a content source lives on, when it was placed on one.
std::optional<std::string> content_source_node(const csi::v1::CreateVolumeRequest& request);

// The node a CreateVolume of a node-local volume goes to: the node its topology asks for, else
// the one its content source lives on; nullopt: this host (`own`).
std::optional<std::string> placement_of(const csi::v1::CreateVolumeRequest& request,
                                        std::string_view own);

// Where the volume a request clones lives, when its id names a node.
std::optional<PlacedId> volume_source_node(const csi::v1::CreateVolumeRequest& request);

// A snapshot or volume of this host as the source of a create on another node: its id names no
// node, so it is named for the node as any node's is, with this host's node id (`own_node`).
// The node then fetches the snapshot from this host (through the proxy, which answers the
// reading ObjectStore calls for this host itself, cluster/node_proxy.h) and restores it: the one
// path of a snapshot held elsewhere (daemon/content_source.cc), where the bare id would be taken
// for one of the node's own and answered NOT_FOUND. A volume is cloned by way of a snapshot of
// it here (cluster/cross_node_clone.cc). Returns the id as the caller gave it ("" when nothing
// changed).
Expected<std::string> place_own_source(const std::string& own_node,
                                       csi::v1::CreateVolumeRequest& request);

// The node whose answer a GetCapacity of a node-local provider is: the one its accessible
// topology names, when that is not `own`; nullopt: this host answers.
std::optional<std::string> capacity_node(const csi::v1::GetCapacityRequest& request,
                                         std::string_view own);

}  // namespace rosetctl
