// NodeExpandVolume for `volume expand` when the volume is staged here.
#include "cli/volume_expand.h"

namespace rosetctl::cli {

Expected<nlohmann::json> expand_on_this_node(Session& session, const VolumeInfo& volume,
                                             int64_t required_bytes, bool node_expansion_required) {
  const std::string& id = volume.volume.volume_id();
  std::string name = volume_name(volume.volume);
  if (!node_expansion_required) return nlohmann::json{{"node", "not needed"}, {"message", ""}};
  auto stagings = session.store().stagings(id);
  if (!stagings) return stagings.status();
  if (stagings->empty()) {
    return nlohmann::json{
        {"node", "pending"},
        {"message", fmt::format("volume \"{}\" is not connected here; it grows at the next "
                                "connect",
                                name)}};
  }
  const std::string& staging = stagings->front().staging_path;
  auto publications = session.store().node_publications_of_staging(id, staging);
  if (!publications) return publications.status();
  csi::v1::NodeExpandVolumeRequest request;
  request.set_volume_id(id);
  request.set_volume_path(publications->empty() ? staging : publications->front().target_path);
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
