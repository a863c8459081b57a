// Translation between the CSI wire messages and the provider's domain types.
#pragma once

#include <google/protobuf/map.h>

#include <string>
#include <string_view>

#include "csi.pb.h"
#include "providers/provider.h"
#include "providers/volume_context.h"

namespace rosetctl {

inline constexpr const char* kTopologyNodeKey = "topology.rosetctl.io/node";
// How VolumeRecord::content_source names a restore or clone source: "snapshot:<id>",
// "volume:<id>".
inline constexpr std::string_view kContentSourceSnapshot = "snapshot:";
inline constexpr std::string_view kContentSourceVolume = "volume:";

// INVALID_ARGUMENT naming `field` when the access type or mode is missing.
Expected<Capability> capability_from_proto(const csi::v1::VolumeCapability& proto,
                                           std::string_view field);
csi::v1::VolumeCapability capability_to_proto(const Capability& capability);

// A canonical text form, stored with publications and stagings to tell a compatible retry
// ("same capability") from a conflicting call.
std::string capability_key(const Capability& capability);
// The capability a key describes (to act again on a recorded publication); INTERNAL for a key
// capability_key did not make.
Expected<Capability> capability_from_key(std::string_view key);

StringMap to_map(const google::protobuf::Map<std::string, std::string>& proto);
void fill_map(const StringMap& map, google::protobuf::Map<std::string, std::string>* proto);

// The CSI view of a stored volume: id, capacity, context, content source, and this node's
// topology when the provider's volumes are node-local.
void fill_volume(const VolumeRecord& record, const Provider& provider, std::string_view node_id,
                 csi::v1::Volume* volume);

std::string_view access_mode_name(AccessMode mode);

}  // namespace rosetctl
