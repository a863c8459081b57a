// ControllerModifyVolume: the provider checks and applies the mutable parameters given, the
// daemon records them. Only the keys given change (the spec: nothing is modified because a key
// is absent), and applying what is already in effect again is a no-op, so retries are safe.
// Naming nothing is therefore a no-op too (the CSI sanity suite sends exactly that), once the
// volume is known to exist.
#include <spdlog/spdlog.h>

#include "core/validate.h"
#include "daemon/controller_service.h"
#include "daemon/convert.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {

Status ControllerService::modify_volume(const csi::v1::ControllerModifyVolumeRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  StringMap changes = to_map(request.mutable_parameters());
  // Exclusive, like an expansion: no stage attaches a loop device while its settings change.
  auto lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kExclusive);
  if (!lock) return lock.status();
  auto volume = load_volume(context_, request.volume_id());
  if (!volume) return volume.status();
  // A change to a copy that is moving away (or has) would not travel with it.
  ROSETCTL_RETURN_IF_ERROR(refuse_moving_volume(context_, request.volume_id()));
  if (changes.empty()) return Status::ok();

  // Applied first, then recorded: a crash in between leaves the old value recorded, which the
  // CO's retry (it never saw an answer) applies and records again. A stage cannot come between,
  // as it needs the volume lock.
  auto controller = controller_side(*volume->provider);
  if (!controller) return controller.status();
  ROSETCTL_RETURN_IF_ERROR((*controller)->modify_volume(volume->record, changes));
  StringMap updated = volume->record.mutable_parameters;
  for (const auto& [key, value] : changes)
    updated[key] = value;
  if (updated == volume->record.mutable_parameters) return Status::ok();
  ROSETCTL_RETURN_IF_ERROR(
      context_.store.update_volume_mutable_parameters(volume->record.id, updated));
  for (const auto& [key, value] : changes) {
    spdlog::info("volume \"{}\": mutable parameter {} is now {}", volume->record.name,
                 display_quoted(key), display_quoted(value));
  }
  return Status::ok();
}

}  // namespace rosetctl
