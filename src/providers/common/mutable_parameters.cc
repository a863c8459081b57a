// Mutable parameters of local volumes (see mutable_parameters.h).
#include "providers/common/mutable_parameters.h"

#include <array>

#include "core/validate.h"

namespace rosetctl {
namespace {

// Keys that describe what a volume is; a StorageClass or the CLI may pass them to CreateVolume,
// and a VolumeAttributesClass may try to change them.
constexpr std::array<std::string_view, 6> kFixedAtCreation = {
    "type", "fsType", "fstype", "fs", "csi.storage.k8s.io/fstype", "provider"};
constexpr std::array<std::string_view, 3> kSizeKeys = {"size", "capacity", "capacity_bytes"};

bool is_one_of(std::string_view key, const auto& keys) {
  for (std::string_view candidate : keys) {
    if (key == candidate) return true;
  }
  return false;
}

Status check_one(std::string_view key, std::string_view value, bool image,
                 std::string_view volume) {
  if (is_one_of(key, kFixedAtCreation)) {
    return error(Code::kInvalidArgument,
                 "parameter {} of volume \"{}\" is fixed at creation (the volume's type, "
                 "filesystem and provider never change); create a new volume to get another "
                 "(mutable: {})",
                 display_quoted(key), volume, kParameterDirectIo);
  }
  if (is_one_of(key, kSizeKeys)) {
    return error(Code::kInvalidArgument,
                 "parameter {} cannot be modified: a volume grows through ControllerExpandVolume "
                 "(`rosetctl volume expand`) (mutable: {})",
                 display_quoted(key), kParameterDirectIo);
  }
  if (key != kParameterDirectIo) {
    return error(Code::kInvalidArgument,
                 "unknown mutable parameter {} for local volumes (mutable: {}=true|false)",
                 display_quoted(key), kParameterDirectIo);
  }
  if (value != "true" && value != "false") {
    return error(Code::kInvalidArgument, "mutable parameter {} must be true or false, not {}",
                 kParameterDirectIo, display_quoted(value));
  }
  if (!image) {
    return error(Code::kInvalidArgument,
                 "mutable parameter {} applies to image and block volumes (it sets how their loop "
                 "device reaches the image); volume \"{}\" is a directory volume",
                 kParameterDirectIo, volume);
  }
  return Status::ok();
}

}  // namespace

Status check_mutable_parameters(const StringMap& changes, bool image, std::string_view volume) {
  for (const auto& [key, value] : changes) {
    ROSETCTL_RETURN_IF_ERROR(check_one(key, value, image, volume));
  }
  return Status::ok();
}

StringMap initial_mutable_parameters(const CreateVolumeSpec& spec) {
  StringMap out;
  auto given = spec.parameters.find(kParameterDirectIo);
  if (given != spec.parameters.end()) out.insert(*given);
  for (const auto& [key, value] : spec.mutable_parameters)
    out[key] = value;
  return out;
}

DirectIo direct_io_setting(const StringMap& mutable_parameters) {
  auto it = mutable_parameters.find(kParameterDirectIo);
  if (it == mutable_parameters.end()) return DirectIo::kDefault;
  return it->second == "false" ? DirectIo::kOff : DirectIo::kOn;
}

}  // namespace rosetctl
