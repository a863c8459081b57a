// A volume's move to another node (`rosetctl volume move`), as the node that holds it sees it.
// The CLI runs the move from the controller seat with calls a user could make (snapshots on
// this node, pulls into the receiver, CreateVolume there); what only this node can do is this
// file's: pause the volume (no new publication, refused while anything holds it) before the last
// delta, record where it went once the copy is the volume, and answer every later publication of
// the old id with the new one. Why a pause refuses rather than waits: the CLI decides how long to
// wait for the last writer (its --wait-unpublished), and a refusal says who still holds it.
#pragma once

#include <string_view>

#include "core/status.h"
#include "daemon/service_context.h"
#include "rosetctl.pb.h"

namespace rosetctl {

// FAILED_PRECONDITION naming the new id once `volume_id` has moved; while it is paused, too
// (`paused_refuses`: a publication; a snapshot is the move's own last delta and goes on).
Status refuse_moving_volume(const ServiceContext& context, std::string_view volume_id,
                            bool paused_refuses = true);
// The same for a move record already read (null: none).
Status refuse_move(std::string_view volume_id, const VolumeMove* move, bool paused_refuses = true);

// What ControllerGetVolume and ListVolumes say of a volume paused or moved ("" for neither).
Expected<std::string> move_condition(const ServiceContext& context, std::string_view volume_id);

// Catalog/SetVolumeMove on this host's volume.
Status set_volume_move_here(const ServiceContext& context, const v1::SetVolumeMoveRequest& request);

}  // namespace rosetctl
