// The node half of `rosetctl volume expand`: after ControllerExpandVolume grew the volume,
// NodeExpandVolume grows what is staged on this host (the loop device and the filesystem on it).
#pragma once

#include <nlohmann/json.hpp>

#include "cli/session.h"
#include "cli/volume_lookup.h"

namespace rosetctl::cli {

// What happened on this node, as the `expansion` object of `volume expand -o json`:
// {"node": "done" | "pending" | "not needed", "message": "..."}. A filesystem that cannot
// grow online (ext4 without CAP_SYS_RESOURCE) is "pending": it grows at the next connect.
// Other failures are errors.
Expected<nlohmann::json> expand_on_this_node(Session& session, const VolumeInfo& volume,
                                             int64_t required_bytes, bool node_expansion_required);

}  // namespace rosetctl::cli
