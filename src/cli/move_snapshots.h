// The snapshots a move (cli/volume_move.h) takes on A, pulls into B, finds again on a rerun,
// and removes from both nodes that hold a copy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/move_plan.h"
#include "cli/session.h"

namespace rosetctl::cli {

// A snapshot of the volume on A, ready; its placed id. A pre-copy round's keeps a file written to
// while it is read as read (the volume is in use): only the final delta must be consistent.
enum class MoveSnapshot { kPreCopy, kFinal };
Expected<std::string> take_move_snapshot(Session& session, const MovePlan& move,
                                         const std::string& step, MoveSnapshot kind);

// The move's snapshots earlier runs left, by their names, wherever they are (A's, and copies
// on B that an undo could not remove while B was down), as A's placed ids: removing one removes
// both copies. And the name of A's "final" one, if there is one.
struct MoveLeftovers {
  std::vector<std::string> ids;
  std::optional<std::string> final_name;
};
Expected<MoveLeftovers> move_snapshots_left(Session& session, const MovePlan& move);

// B pulls the snapshot from A: only the objects it lacks travel. `prepare`: B then restores it
// ahead, so the restore of the final delta in the pause moves the files that did not change.
Expected<PreCopyRound> pull_to_receiver(Session& session, const MovePlan& move,
                                        const std::string& snapshot, bool prepare = false);

// The move's snapshots, from B (its pulled copies) and A: remove_snapshot_copies below.
bool remove_move_snapshots(Session& session, const MovePlan& move,
                           const std::vector<std::string>& snapshots);

// DeleteSnapshot of each of SNAPSHOTS (SOURCE's placed ids) on RECEIVER (its pulled copy, the
// same local id) and on SOURCE; a failure is a note on stderr, not the caller's. False when one
// of SOURCE's stays: those are what a later run of the move finds by name.
bool remove_snapshot_copies(Session& session, const std::string& source,
                            const std::string& receiver, const std::vector<std::string>& snapshots);

}  // namespace rosetctl::cli
