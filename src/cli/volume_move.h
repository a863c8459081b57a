// The move of one local volume to another node: `volume move` runs it for the volume named, and
// `node drain` for each volume of a node in turn (one code path, cli/volume_move.cc says how).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/session.h"
#include "cli/volume_lookup.h"
#include "core/move_condition.h"
#include "core/status.h"

namespace rosetctl::cli {

struct MoveSettings {
  std::string to_node;
  bool delete_source = false;
  int wait_unpublished = 0;  // seconds
  int max_rounds = 4;
  int64_t small = int64_t{16} << 20;
};

// Where an earlier run left the volume's move (paused, or moved), from the condition its node
// reports; nullopt: no move under way.
std::optional<MoveCondition> move_state_of(const VolumeInfo& info);

// OK when the kind of volume moves; else why not: FAILED_PRECONDITION for a provider whose
// volumes are bound to no node (roset, iscsi), UNIMPLEMENTED for a volume of the controller
// host. (move_volume also refuses its own node, INVALID_ARGUMENT, and one not registered,
// NOT_FOUND.)
Status check_movable_kind(const VolumeInfo& info);

// The settings from `volume move`'s options (`node drain` takes the same ones).
Expected<MoveSettings> move_settings(const std::string& to_node, bool delete_source,
                                     int wait_unpublished, int max_rounds,
                                     const std::string& small);

// Moves the volume to `settings.to_node` and returns what `volume move -o json` prints. Run again
// after any failure or kill, it takes up where the volume is: a move paused by an earlier run
// goes on from the pause, one switched already only has its snapshots removed.
Expected<nlohmann::json> move_volume(Session& session, const VolumeInfo& info,
                                     const MoveSettings& settings);

// One line for a terminal from move_volume's JSON.
std::string move_summary(const nlohmann::json& moved);

}  // namespace rosetctl::cli
