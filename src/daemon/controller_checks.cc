// The shared field checks of the CSI Controller calls (controller_checks.h).
#include "daemon/controller_checks.h"

#include <fmt/format.h>

#include "daemon/convert.h"

namespace rosetctl {

Expected<CapacityRange> capacity_from_proto(const csi::v1::CapacityRange& range) {
  if (range.required_bytes() < 0 || range.limit_bytes() < 0) {
    return error(Code::kInvalidArgument, "capacity_range must not be negative");
  }
  if (range.limit_bytes() > 0 && range.limit_bytes() < range.required_bytes()) {
    return error(Code::kInvalidArgument,
                 "capacity_range.limit_bytes ({}) is less than required_bytes ({})",
                 range.limit_bytes(), range.required_bytes());
  }
  return CapacityRange{range.required_bytes(), range.limit_bytes()};
}

StringMap provider_parameters(const StringMap& parameters) {
  StringMap out = parameters;
  out.erase(std::string(kProviderParameter));
  return out;
}

Expected<std::vector<Capability>> capabilities_from_proto(
    const google::protobuf::RepeatedPtrField<csi::v1::VolumeCapability>& protos) {
  if (protos.empty()) return error(Code::kInvalidArgument, "volume_capabilities is required");
  std::vector<Capability> out;
  for (int i = 0; i < protos.size(); ++i) {
    auto capability = capability_from_proto(protos[i], fmt::format("volume_capabilities[{}]", i));
    if (!capability) return capability.status();
    out.push_back(std::move(*capability));
  }
  return out;
}

Expected<AccessType> single_access_type(const std::vector<Capability>& capabilities) {
  AccessType type = capabilities.front().access_type;
  for (const Capability& capability : capabilities) {
    if (capability.access_type != type) {
      return error(Code::kInvalidArgument,
                   "volume_capabilities mix block and mount access; a volume is one or the other");
    }
  }
  return type;
}

}  // namespace rosetctl
