// The field checks several CSI Controller calls of this host share (daemon/controller_service.h):
// capacity ranges, volume capabilities, and the daemon's own `provider` parameter.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <string_view>
#include <vector>

#include "core/status.h"
#include "csi.pb.h"
#include "providers/provider.h"

namespace rosetctl {

// The parameter that names a volume's provider; not passed to the provider.
inline constexpr std::string_view kProviderParameter = "provider";

struct CapacityRange {
  int64_t required = 0;
  int64_t limit = 0;  // 0: none
};

Expected<CapacityRange> capacity_from_proto(const csi::v1::CapacityRange& range);

// Parameters meant for the provider: without the daemon's own `provider` key.
StringMap provider_parameters(const StringMap& parameters);

// At least one, each one valid (INVALID_ARGUMENT naming volume_capabilities[i] otherwise).
Expected<std::vector<Capability>> capabilities_from_proto(
    const google::protobuf::RepeatedPtrField<csi::v1::VolumeCapability>& protos);

// One access type per volume: mixing block and mount in one request is contradictory.
Expected<AccessType> single_access_type(const std::vector<Capability>& capabilities);

}  // namespace rosetctl
