// What a move (cli/volume_move.h) moves, from where and to where, and what one pre-copy round
// sent: shared by the move's steps and its snapshots (cli/move_snapshots.h).
#pragma once

#include <spdlog/fmt/fmt.h>

#include <cstdint>
#include <string>

#include "cluster/placed_id.h"
#include "csi.pb.h"

namespace rosetctl::cli {

struct PreCopyRound {
  std::string snapshot;  // A's placed id
  int64_t bytes_sent = 0;
  int64_t objects_sent = 0;
};

struct MovePlan {
  std::string name;
  std::string old_id;
  PlacedId from;
  std::string to;
  std::string tag;  // the same for every run of this move: its snapshots' names start with it
  std::string run;  // this run's, in the names of the snapshots it takes
  csi::v1::Volume volume;
  bool to_cordoned = false;  // the controller places no new volume on `to` (node cordon)
};

inline std::string move_snapshot_prefix(const MovePlan& move) {
  return fmt::format("move-{}-", move.tag);
}

}  // namespace rosetctl::cli
