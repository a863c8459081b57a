// Proto <-> domain conversions; nothing here touches state.
#include "daemon/convert.h"

#include <nlohmann/json.hpp>

namespace rosetctl {

Expected<Capability> capability_from_proto(const csi::v1::VolumeCapability& proto,
                                           std::string_view field) {
  Capability capability;
  switch (proto.access_type_case()) {
    case csi::v1::VolumeCapability::kBlock:
      capability.access_type = AccessType::kBlock;
      break;
    case csi::v1::VolumeCapability::kMount:
      capability.access_type = AccessType::kMount;
      capability.fs_type = proto.mount().fs_type();
      capability.mount_flags.assign(proto.mount().mount_flags().begin(),
                                    proto.mount().mount_flags().end());
      capability.mount_group = proto.mount().volume_mount_group();
      break;
    default:
      return error(Code::kInvalidArgument, "{}.access_type is required (block or mount)", field);
  }
  int mode = proto.access_mode().mode();
  if (mode == 0 || !csi::v1::VolumeCapability_AccessMode_Mode_IsValid(mode)) {
    return error(Code::kInvalidArgument, "{}.access_mode.mode is required", field);
  }
  capability.access_mode = static_cast<AccessMode>(mode);
  return capability;
}

csi::v1::VolumeCapability capability_to_proto(const Capability& capability) {
  csi::v1::VolumeCapability proto;
  if (capability.access_type == AccessType::kBlock) {
    proto.mutable_block();
  } else {
    auto* mount = proto.mutable_mount();
    mount->set_fs_type(capability.fs_type);
    for (const auto& flag : capability.mount_flags)
      mount->add_mount_flags(flag);
    mount->set_volume_mount_group(capability.mount_group);
  }
  proto.mutable_access_mode()->set_mode(
      static_cast<csi::v1::VolumeCapability::AccessMode::Mode>(capability.access_mode));
  return proto;
}

std::string capability_key(const Capability& capability) {
  nlohmann::json key = {
      {"access_type", capability.access_type == AccessType::kBlock ? "block" : "mount"},
      {"access_mode", static_cast<int>(capability.access_mode)},
      {"fs_type", capability.fs_type},
      {"mount_flags", capability.mount_flags},
      {"mount_group", capability.mount_group},
  };
  return key.dump();
}

Expected<Capability> capability_from_key(std::string_view key) {
  auto json = nlohmann::json::parse(key, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return error(Code::kInternal, "recorded capability is not valid JSON");
  Capability capability;
  capability.access_type =
      json.value("access_type", "mount") == "block" ? AccessType::kBlock : AccessType::kMount;
  capability.access_mode = static_cast<AccessMode>(json.value("access_mode", 0));
  capability.fs_type = json.value("fs_type", "");
  capability.mount_flags = json.value("mount_flags", std::vector<std::string>{});
  capability.mount_group = json.value("mount_group", "");
  return capability;
}

StringMap to_map(const google::protobuf::Map<std::string, std::string>& proto) {
  return StringMap(proto.begin(), proto.end());
}

void fill_map(const StringMap& map, google::protobuf::Map<std::string, std::string>* proto) {
  for (const auto& [key, value] : map)
    (*proto)[key] = value;
}

void fill_volume(const VolumeRecord& record, const Provider& provider, std::string_view node_id,
                 csi::v1::Volume* volume) {
  volume->set_volume_id(record.id);
  volume->set_capacity_bytes(record.capacity_bytes);
  fill_map(record.context, volume->mutable_volume_context());
  (*volume->mutable_volume_context())[kContextName] = record.name;
  (*volume->mutable_volume_context())[kContextProvider] = record.provider;
  const std::string& source = record.content_source;
  if (source.starts_with(kContentSourceSnapshot)) {
    volume->mutable_content_source()->mutable_snapshot()->set_snapshot_id(
        source.substr(kContentSourceSnapshot.size()));
  } else if (source.starts_with(kContentSourceVolume)) {
    volume->mutable_content_source()->mutable_volume()->set_volume_id(
        source.substr(kContentSourceVolume.size()));
  }
  if (!provider.volumes_are_node_local()) return;
  (*volume->add_accessible_topology()->mutable_segments())[kTopologyNodeKey] = std::string(node_id);
}

std::string_view access_mode_name(AccessMode mode) {
  return csi::v1::VolumeCapability_AccessMode_Mode_Name(
      static_cast<csi::v1::VolumeCapability::AccessMode::Mode>(mode));
}

}  // namespace rosetctl
