// The one call that moves a snapshot between nodes, for `snapshot push|pull` and `volume move`.
#pragma once

#include <string>

#include "cli/session.h"
#include "core/status.h"
#include "rosetctl.pb.h"

namespace rosetctl::cli {

// PullSnapshot on `receiver` (through the controller's proxy; "" for this host's plugin),
// drawing its progress on a terminal. UNAVAILABLE when the receiver ended without its result.
Expected<v1::PullSnapshotProgress> pull_into(Session& session, const std::string& receiver,
                                             const v1::PullSnapshotRequest& request);

}  // namespace rosetctl::cli
