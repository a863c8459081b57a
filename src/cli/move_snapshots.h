// Removing the snapshots a move (cli/volume_move.h) took, from both nodes that hold a copy.
#pragma once

#include <string>
#include <vector>

#include "cli/session.h"

namespace rosetctl::cli {

// DeleteSnapshot of each of SNAPSHOTS (SOURCE's placed ids) on RECEIVER (its pulled copy, the
// same local id) and on SOURCE; a failure is a note on stderr, not the caller's. False when one
// of SOURCE's stays: those are what a later run of the move finds by name.
bool remove_snapshot_copies(Session& session, const std::string& source,
                            const std::string& receiver, const std::vector<std::string>& snapshots);

}  // namespace rosetctl::cli
