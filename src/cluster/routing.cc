// The routing decisions of the Controller calls (routing.h).
#include "cluster/routing.h"

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
