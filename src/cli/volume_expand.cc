// NodeExpandVolume for `volume expand` when the volume is staged here.
#include "cli/volume_expand.h"

namespace rosetctl::cli {

Expected<nlohmann::json> expand_on_this_node(Session& session, const VolumeInfo& volume,
                                             int64_t required_bytes, bool node_expansion_required) {
  const std::string& id = volume.volume.volume_id();
  std::string name = volume_name(volume.volume);
  if (!node_expansion_required) return nlohmann::json{{"node", "not needed"}, {"message", ""}};
  auto on_node = volume_on_node(session, id);
  if (!on_node) return on_node.status();
  if (on_node->stagings().empty()) {
    return nlohmann::json{
        {"node", "pending"},
        {"message", fmt::format("volume \"{}\" is not connected here; it grows at the next "
                                "connect",
                                name)}};
  }
  const std::string& staging = on_node->stagings(0).staging_path();
  // The first publication of that staging (by target path), else the staging itself.
  std::string volume_path = staging;
  for (const v1::NodePublication& publication : on_node->publications()) {
    if (publication.staging_path() == staging) {
      volume_path = publication.target_path();
      break;
    }
  }
  csi::v1::NodeExpandVolumeRequest request;
  request.set_volume_id(id);
  request.set_volume_path(volume_path);
  request.set_staging_target_path(staging);
  request.mutable_capacity_range()->set_required_bytes(required_bytes);
  *request.mutable_volume_capability() = attach_capability(volume.volume);
  csi::v1::NodeExpandVolumeResponse response;
  Status status = session.client().node(&csi::v1::Node::Stub::NodeExpandVolume, request, &response);
  if (status.code() == Code::kFailedPrecondition) {
    return nlohmann::json{{"node", "pending"}, {"message", status.message()}};
  }
  if (!status) return status;
  return nlohmann::json{{"node", "done"}, {"message", ""}};
}

}  // namespace rosetctl::cli
