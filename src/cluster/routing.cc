// The routing decisions of the Controller calls (routing.h).
#include "cluster/routing.h"

#include <algorithm>
#include <utility>

#include "daemon/convert.h"

namespace rosetctl {

std::optional<std::string> node_of_id(std::string_view id, std::string_view own) {
  auto placed = decode_placed_id(id);
  if (!placed || placed->node == own) return std::nullopt;
  return std::move(placed->node);
}

std::optional<std::string> requested_node(const csi::v1::TopologyRequirement& requirement) {
  for (const auto* topologies : {&requirement.preferred(), &requirement.requisite()}) {
    for (const auto& topology : *topologies) {
      auto it = topology.segments().find(kTopologyNodeKey);
      if (it != topology.segments().end()) return it->second;
    }
  }
  return std::nullopt;
}

std::vector<std::string> requested_nodes(const csi::v1::TopologyRequirement& requirement) {
  std::vector<std::string> nodes;
  for (const auto* topologies : {&requirement.preferred(), &requirement.requisite()}) {
    for (const auto& topology : *topologies) {
      auto it = topology.segments().find(kTopologyNodeKey);
      if (it != topology.segments().end() &&
          std::find(nodes.begin(), nodes.end(), it->second) == nodes.end()) {
        nodes.push_back(it->second);
      }
    }
  }
  return nodes;
}

csi::v1::CreateVolumeRequest narrowed_to_node(const csi::v1::CreateVolumeRequest& request,
                                              const std::string& node) {
  csi::v1::Topology topology;
  (*topology.mutable_segments())[kTopologyNodeKey] = node;
  const auto& requirement = request.accessibility_requirements();
  for (const auto* topologies : {&requirement.preferred(), &requirement.requisite()}) {
    auto found = std::find_if(topologies->begin(), topologies->end(), [&node](const auto& given) {
      auto it = given.segments().find(kTopologyNodeKey);
      return it != given.segments().end() && it->second == node;
    });
    if (found != topologies->end()) {
      topology = *found;
      break;
    }
  }
  csi::v1::CreateVolumeRequest narrowed = request;
  auto* narrowed_requirement = narrowed.mutable_accessibility_requirements();
  narrowed_requirement->Clear();
  *narrowed_requirement->add_requisite() = topology;
  *narrowed_requirement->add_preferred() = topology;
  return narrowed;
}

Status cordoned_error(std::string_view node) {
  return error(Code::kResourceExhausted,
               "node \"{}\" is cordoned: it takes no new volume (its volumes stay and work); "
               "choose another node, or uncordon it once its maintenance is over (rosetctl node "
               "uncordon {})",
               node, node);
}

std::optional<std::string> content_source_node(const csi::v1::CreateVolumeRequest& request) {
  if (!request.has_volume_content_source()) return std::nullopt;
  const auto& source = request.volume_content_source();
  auto placed = decode_placed_id(source.has_snapshot() ? source.snapshot().snapshot_id()
                                                       : source.volume().volume_id());
  if (!placed) return std::nullopt;
  return placed->node;
}

std::optional<std::string> placement_of(const csi::v1::CreateVolumeRequest& request,
                                        std::string_view own) {
  auto node = requested_node(request.accessibility_requirements());
  if (!node) node = content_source_node(request);
  if (!node || *node == own) return std::nullopt;
  return node;
}

std::optional<PlacedId> volume_source_node(const csi::v1::CreateVolumeRequest& request) {
  if (!request.volume_content_source().has_volume()) return std::nullopt;
  return decode_placed_id(request.volume_content_source().volume().volume_id());
}

Expected<std::string> place_own_source(const std::string& own_node,
                                       csi::v1::CreateVolumeRequest& request) {
  if (!request.has_volume_content_source()) return std::string();
  auto* source = request.mutable_volume_content_source();
  std::string* id = source->has_snapshot() ? source->mutable_snapshot()->mutable_snapshot_id()
                    : source->has_volume() ? source->mutable_volume()->mutable_volume_id()
                                           : nullptr;
  if (id == nullptr || id->empty() || decode_placed_id(*id)) return std::string();
  auto placed = encode_placed_id(own_node, *id);
  if (!placed) return placed.status();
  return std::exchange(*id, std::move(*placed));
}

std::optional<std::string> capacity_node(const csi::v1::GetCapacityRequest& request,
                                         std::string_view own) {
  if (!request.has_accessible_topology()) return std::nullopt;
  const auto& segments = request.accessible_topology().segments();
  auto it = segments.find(kTopologyNodeKey);
  if (it == segments.end() || it->second == own) return std::nullopt;
  return it->second;
}

}  // namespace rosetctl
