// Name/id resolution via ControllerGetVolume and ListVolumes.
#include "cli/volume_lookup.h"

#include <optional>

#include "cluster/placed_id.h"
#include "core/map_lookup.h"
#include "core/validate.h"
#include "daemon/convert.h"
#include "providers/registry.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {
namespace {

template <typename VolumeStatus>
VolumeInfo info_of(const csi::v1::Volume& volume, const VolumeStatus& status) {
  VolumeInfo info{volume,
                  {status.published_node_ids().begin(), status.published_node_ids().end()},
                  status.volume_condition().abnormal(),
                  status.volume_condition().message()};
  return info;
}

}  // namespace

std::string volume_name(const csi::v1::Volume& volume) {
  return value_or_empty(volume.volume_context(), kContextName);
}

bool is_block_volume(const csi::v1::Volume& volume) {
  auto it = volume.volume_context().find(kContextAccess);
  return it != volume.volume_context().end() && it->second == kAccessBlock;
}

bool is_read_only_volume(const csi::v1::Volume& volume) {
  auto it = volume.volume_context().find(kContextReadOnly);
  return it != volume.volume_context().end() && it->second == "true";
}

csi::v1::VolumeCapability attach_capability(const csi::v1::Volume& volume,
                                            const std::vector<ProviderRegistration>& providers) {
  csi::v1::VolumeCapability capability;
  if (is_block_volume(volume)) {
    capability.mutable_block();
  } else {
    capability.mutable_mount();
  }
  // A shared filesystem (its provider says so) is attached by every host that connects it, each
  // writing: ReadWriteMany. A volume that lives on one node is attached by that node alone.
  const ProviderRegistration* provider =
      find_registration(value_or_empty(volume.volume_context(), kContextProvider), providers);
  bool shared = provider != nullptr && provider->shared_by_nodes;
  using Mode = csi::v1::VolumeCapability::AccessMode;
  capability.mutable_access_mode()->set_mode(is_read_only_volume(volume)
                                                 ? Mode::MULTI_NODE_READER_ONLY
                                             : shared ? Mode::MULTI_NODE_MULTI_WRITER
                                                      : Mode::SINGLE_NODE_WRITER);
  return capability;
}

Expected<std::vector<VolumeInfo>> list_all_volumes(CsiClient& client,
                                                   std::vector<std::string>* unreachable) {
  std::vector<VolumeInfo> out;
  csi::v1::ListVolumesRequest request;
  request.set_max_entries(500);
  do {
    csi::v1::ListVolumesResponse response;
    // A controller whose nodes did not all answer lists the others' volumes (the combined
    // list); which nodes are missing is reported, not a failure of the whole list.
    ROSETCTL_RETURN_IF_ERROR(client.list_volumes_partial(request, &response, unreachable));
    for (const auto& entry : response.entries())
      out.push_back(info_of(entry.volume(), entry.status()));
    request.set_starting_token(response.next_token());
  } while (!request.starting_token().empty());
  return out;
}

Expected<std::vector<v1::NodeVolume>> volumes_on_node(Session& session,
                                                      const std::vector<std::string>& volume_ids) {
  if (volume_ids.empty()) return std::vector<v1::NodeVolume>{};
  v1::GetNodeVolumesRequest request;
  request.set_node_id(session.node_id());
  for (const std::string& id : volume_ids)
    request.add_volume_ids(id);
  v1::GetNodeVolumesResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      session.client().node_state(&v1::NodeState::Stub::GetNodeVolumes, request, &response));
  if (response.volumes_size() != request.volume_ids_size()) {
    return error(Code::kInternal, "node {} answered {} volumes for {}",
                 display_quoted(session.node_id()), response.volumes_size(),
                 request.volume_ids_size());
  }
  return std::vector<v1::NodeVolume>(response.volumes().begin(), response.volumes().end());
}

Expected<v1::NodeVolume> volume_on_node(Session& session, const std::string& volume_id) {
  auto volumes = volumes_on_node(session, {volume_id});
  if (!volumes) return volumes.status();
  return std::move(volumes->front());
}

namespace {

// FindVolume's answer: the id `name_or_id` names, or nullopt when nothing has that name or id
// in the catalog (ControllerGetVolume then has the last word).
Expected<std::optional<std::string>> find_volume_id(Session& session, std::string_view name_or_id) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(name_or_id, "volume name or id"));
  // CSI has no lookup by name: the controller's catalog has.
  v1::FindVolumeRequest find;
  find.set_name_or_id(std::string(name_or_id));
  v1::FindVolumeResponse found;
  Status looked_up = session.client().catalog(&v1::Catalog::Stub::FindVolume, find, &found);
  if (looked_up.is_ok()) return std::optional<std::string>(found.volume_id());
  if (looked_up.code() != Code::kNotFound || is_ambiguous_name(looked_up)) return looked_up;
  return std::optional<std::string>();
}

Expected<VolumeInfo> get_volume(Session& session, std::string_view name_or_id,
                                const std::optional<std::string>& found) {
  csi::v1::ControllerGetVolumeRequest request;
  request.set_volume_id(found ? *found : std::string(name_or_id));
  csi::v1::ControllerGetVolumeResponse response;
  Status status = session.client().controller(&csi::v1::Controller::Stub::ControllerGetVolume,
                                              request, &response);
  if (status.is_ok()) return info_of(response.volume(), response.status());
  if (status.code() != Code::kNotFound) return status;
  return with_only_this_host_hint(
      session, error(Code::kNotFound, "no volume is named \"{}\" or has that id", name_or_id));
}

}  // namespace

bool found_by_name(const std::string& id, std::string_view name_or_id) {
  if (id == name_or_id || decode_placed_id(name_or_id)) return false;
  auto placed = decode_placed_id(id);
  return !placed || placed->local_id != name_or_id;
}

Expected<VolumeInfo> resolve_volume(Session& session, std::string_view name_or_id) {
  auto found = find_volume_id(session, name_or_id);
  if (!found) return found.status();
  return get_volume(session, name_or_id, *found);
}

Expected<VolumeRef> resolve_volume_ref(Session& session, std::string_view name_or_id) {
  auto found = find_volume_id(session, name_or_id);
  if (!found) return found.status();
  if (*found && found_by_name(**found, name_or_id))
    return VolumeRef{**found, std::string(name_or_id)};
  auto info = get_volume(session, name_or_id, *found);
  if (!info) return info.status();
  return VolumeRef{info->volume.volume_id(), volume_name(info->volume)};
}

}  // namespace rosetctl::cli
