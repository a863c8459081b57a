// Shared volume lookups for the CSI services.
#include "daemon/volume_lookup.h"

#include "core/validate.h"
#include "daemon/volume_moves.h"

namespace rosetctl {

Status check_volume_id(std::string_view volume_id, std::string_view field) {
  return validate_id(volume_id, field);
}

Expected<LoadedVolume> load_volume(const ServiceContext& context, std::string_view volume_id) {
  auto provider = context.providers.for_volume(volume_id);
  if (!provider) return provider.status();
  auto record = context.store.find_volume(volume_id);
  if (!record) return record.status();
  if (!record->has_value())
    return error(Code::kNotFound, "volume \"{}\" does not exist", volume_id);
  return LoadedVolume{std::move(**record), *provider};
}

template <typename VolumeStatus>
Status fill_volume_status(const ServiceContext& context, const LoadedVolume& volume,
                          VolumeStatus* status) {
  auto publications = context.store.controller_publications(volume.record.id);
  if (!publications) return publications.status();
  for (const auto& publication : *publications)
    status->add_published_node_ids(publication.node_id);
  // A provider without a controller side has nothing to say about its volumes' health here.
  const ControllerSide* controller = volume.provider->controller();
  VolumeCondition condition =
      controller != nullptr ? controller->volume_condition(volume.record) : VolumeCondition{};
  // A volume paused or moved by `volume move` says so, above its own health.
  auto moving = move_condition(context, volume.record.id);
  if (!moving) return moving.status();
  if (!moving->empty()) condition = VolumeCondition{true, *moving};
  status->mutable_volume_condition()->set_abnormal(condition.abnormal);
  status->mutable_volume_condition()->set_message(condition.abnormal ? condition.message
                                                                     : "volume is healthy");
  return Status::ok();
}

template Status fill_volume_status(const ServiceContext&, const LoadedVolume&,
                                   csi::v1::ListVolumesResponse::VolumeStatus*);
template Status fill_volume_status(const ServiceContext&, const LoadedVolume&,
                                   csi::v1::ControllerGetVolumeResponse::VolumeStatus*);

}  // namespace rosetctl
