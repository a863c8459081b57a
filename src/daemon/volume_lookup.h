// Lookups both the controller and node services need: a stored volume with its provider, and
// request-field checks that name the offending field.
#pragma once

#include <string_view>

#include "core/status.h"
#include "csi.pb.h"
#include "daemon/service_context.h"

namespace rosetctl {

struct LoadedVolume {
  VolumeRecord record;
  Provider* provider = nullptr;
};

// NOT_FOUND (naming the id) when no such volume is stored here.
Expected<LoadedVolume> load_volume(const ServiceContext& context, std::string_view volume_id);

// INVALID_ARGUMENT "<field> is required" for an empty id, the validator's message for a
// malformed one.
Status check_volume_id(std::string_view volume_id, std::string_view field = "volume_id");

// Published node ids and condition, as ListVolumes and ControllerGetVolume report them.
template <typename VolumeStatus>
Status fill_volume_status(const ServiceContext& context, const LoadedVolume& volume,
                          VolumeStatus* status);

}  // namespace rosetctl
