// The source node's side of a volume move (volume_moves.h).
#include "daemon/volume_moves.h"

#include "core/move_condition.h"
#include "core/validate.h"
#include "daemon/volume_locks.h"
#include "providers/provider_registration.h"

namespace rosetctl {

Status refuse_moving_volume(const ServiceContext& context, std::string_view volume_id,
                            bool paused_refuses) {
  auto move = context.store.find_volume_move(volume_id);
  if (!move) return move.status();
  return refuse_move(volume_id, move->has_value() ? &**move : nullptr, paused_refuses);
}

Status refuse_move(std::string_view volume_id, const VolumeMove* move, bool paused_refuses) {
  if (move == nullptr) return Status::ok();
  const VolumeMove& found = *move;
  if (found.moved) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" has moved to node \"{}\": it is {} now (this node keeps its old "
                 "copy, which takes no publication, until it is deleted)",
                 volume_id, found.to_node, found.new_volume_id);
  }
  if (!paused_refuses) return Status::ok();
  return error(Code::kFailedPrecondition,
               "volume \"{}\" is paused while it moves to node \"{}\": it takes no new "
               "publication; use it there, by its name, once the move is done",
               volume_id, found.to_node);
}

Expected<std::string> move_condition(const ServiceContext& context, std::string_view volume_id) {
  auto move = context.store.find_volume_move(volume_id);
  if (!move) return move.status();
  if (!move->has_value()) return std::string();
  if ((*move)->moved) return moved_condition((*move)->to_node, (*move)->new_volume_id);
  return paused_move_condition((*move)->to_node);
}

Status set_volume_move_here(const ServiceContext& context,
                            const v1::SetVolumeMoveRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(validate_id(request.volume_id(), "volume_id"));
  if (request.step() != v1::SetVolumeMoveRequest::CANCEL) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.to_node(), "to_node"));
  }
  auto provider = context.providers.for_volume(request.volume_id());
  if (!provider) return provider.status();
  // Its provider's registration says whether its volumes are bound to one node.
  const ProviderRegistration* registration = find_registration((*provider)->name());
  if (registration != nullptr && !registration->not_moved_because.empty()) {
    return error(Code::kFailedPrecondition, "volume \"{}\" is a {} volume: {}", request.volume_id(),
                 (*provider)->name(), registration->not_moved_because);
  }
  // Exclusive, so no stage or publication is in flight while the pause looks for users.
  auto volume_lock = try_lock_volume(context.locks, request.volume_id(), LockMode::kExclusive);
  if (!volume_lock) return volume_lock.status();
  switch (request.step()) {
    case v1::SetVolumeMoveRequest::PAUSE:
      return context.store.pause_volume_move(request.volume_id(), request.to_node());
    case v1::SetVolumeMoveRequest::FINISH:
      ROSETCTL_RETURN_IF_ERROR(validate_id(request.new_volume_id(), "new_volume_id"));
      return context.store.finish_volume_move(request.volume_id(), request.to_node(),
                                              request.new_volume_id());
    case v1::SetVolumeMoveRequest::CANCEL:
      return context.store.cancel_volume_move(request.volume_id());
    default:
      return error(Code::kInvalidArgument, "step is required: PAUSE, FINISH or CANCEL");
  }
}

}  // namespace rosetctl
