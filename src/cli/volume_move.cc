// A local volume placed on node A made to live on node B under its name (cli/volume_move.h),
// with calls a user could make from the controller seat, in order:
//
//   pre-copy  CreateSnapshot of the volume on A, PullSnapshot of it into B (only what B lacks),
//             again until a round sends little (the volume stays in use on A meanwhile);
//             then the snapshots of all rounds but the last are removed;
//   ahead     B restores the last round ahead (PullSnapshot's prepare_restore), and one more
//             round takes what was written meanwhile: the restore in the pause then moves the
//             files that did not change instead of copying them;
//   pause     Catalog/SetVolumeMove PAUSE on A: no new publication, refused while anything
//             holds the volume (--wait-unpublished waits for the last writer to let go);
//   delta     one more snapshot on A ("final"), pulled into B, and CreateVolume of the name on B
//             from it;
//   switch    SetVolumeMove FINISH on A: A's copy answers with the new id and its name is B's;
//   cleanup   the move's snapshots removed from B and A.
//
// So there is never a second copy that takes writes: A's takes no new publication from the
// pause on, and was published nowhere when it paused.
//
// Resuming. Every step is idempotent by name, and a run starts from where the volume is, as its
// node reports it (move_state_of): kill any party (this CLI, A's serve, B's serve, the
// controller) at any step and run the move again:
//   - not paused: the move's snapshots an earlier run left are stale (writes went on since), so
//     they are removed first and the move starts over;
//   - paused: nothing was written since the pause, so the pre-copy is skipped and the "final"
//     snapshot (the one on A, taken up by its name, if it was taken), the pull and the
//     CreateVolume on B (the same request, so the same volume if it was made) go on to the switch;
// Each run names its snapshots anew ("move-TAG-RUN-N", "move-TAG-final-RUN"): a copy on B that an
// earlier run could not remove (B was down) never holds the name a new snapshot needs there.
//   - moved: only the cleanup is left.
// A failure after the pause gives the volume back to A (CANCEL) when nothing on B can be the
// volume: A's "final" snapshot is removed before the pause ends, so no later run takes up a
// snapshot that later writes made stale. When that removal fails, or the CreateVolume on B may
// have happened (its answer was lost), the volume stays paused and the error says to run the move
// again: a paused volume is unavailable, two live copies would be worse.
#include "cli/volume_move.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "cli/move_plan.h"
#include "cli/move_snapshots.h"
#include "cli/render.h"
#include "cli/snapshot_move.h"
#include "cluster/placed_id.h"
#include "cluster/routing.h"
#include "core/commit_store/sha256.h"
#include "core/crash_point.h"
#include "core/random_id.h"
#include "core/size.h"
#include "core/validate.h"
#include "daemon/convert.h"
#include "providers/provider_registration.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {

Status check_movable_kind(const VolumeInfo& info) {
  const csi::v1::Volume& volume = info.volume;
  auto provider = volume.volume_context().find(kContextProvider);
  std::string kind = provider == volume.volume_context().end() ? "" : provider->second;
  const ProviderRegistration* registration = find_registration(kind);
  if (registration != nullptr && !registration->not_moved_because.empty()) {
    return error(Code::kFailedPrecondition, "volume \"{}\" is a {} volume: {}", volume_name(volume),
                 kind, registration->not_moved_because);
  }
  if (!decode_placed_id(volume.volume_id())) {
    return error(Code::kUnimplemented,
                 "volume \"{}\" ({}) lives on the controller host: moving a volume off the "
                 "controller host is not done yet; only volumes placed on a node move",
                 volume_name(volume), volume.volume_id());
  }
  return Status::ok();
}

namespace {

// The wait for the last writer of a paused volume: the writer is stopped while the move
// waits, so each moment of the wait is a moment without writes. The disconnect usually comes
// soon after the move asks for it (an operator, a script): asked for often at first, then
// once a second.
constexpr std::chrono::milliseconds kMoveInUsePollSoon{100};
constexpr std::chrono::seconds kMoveInUseSoon{60};
constexpr std::chrono::seconds kMoveInUsePoll{1};

// Each step on stderr, in JSON output too: a move takes a while, and its wait for the last
// user is what the operator must act on.
void say_move_step(const std::string& line) {
  std::fprintf(stderr, "rosetctl: %s\n", line.c_str());
}

Status plan_move(Session& session, const VolumeInfo& info, const std::string& to_node,
                 MovePlan* move) {
  ROSETCTL_RETURN_IF_ERROR(check_movable_kind(info));
  const csi::v1::Volume& volume = info.volume;
  move->volume = volume;
  move->old_id = volume.volume_id();
  move->name = volume_name(volume);
  move->to = to_node;
  auto placed = decode_placed_id(move->old_id);
  move->from = *placed;
  if (placed->node == to_node) {
    return error(Code::kInvalidArgument, "volume \"{}\" is on node \"{}\" already", move->name,
                 to_node);
  }
  v1::GetNodeRequest asked;
  asked.set_node_id(to_node);
  v1::GetNodeResponse node;
  Status known = session.client().registry(&v1::Registry::Stub::GetNode, asked, &node);
  if (known.code() == Code::kNotFound) {
    return error(Code::kNotFound,
                 "--to-node \"{}\" is not a registered node (`rosetctl node list` lists them; "
                 "moving onto the controller host is not done yet)",
                 to_node);
  }
  ROSETCTL_RETURN_IF_ERROR(known);
  move->to_cordoned = node.node().cordoned_at() != 0;
  move->tag = sha256_hex(fmt::format("{}\n{}", move->old_id, move->to)).substr(0, 16);
  move->run = random_hex(4);
  return Status::ok();
}

Status set_move(Session& session, const MovePlan& move, v1::SetVolumeMoveRequest::Step step,
                const std::string& new_id = "") {
  v1::SetVolumeMoveRequest request;
  request.set_volume_id(move.old_id);
  request.set_step(step);
  request.set_to_node(move.to);
  request.set_new_volume_id(new_id);
  v1::SetVolumeMoveResponse response;
  return session.client().catalog(&v1::Catalog::Stub::SetVolumeMove, request, &response);
}

// PAUSE, retried while the volume is in use for up to --wait-unpublished seconds.
Status pause_on_source(Session& session, const MovePlan& move, const MoveSettings& settings) {
  auto began = std::chrono::steady_clock::now();
  auto give_up = began + std::chrono::seconds(settings.wait_unpublished);
  bool told = false;
  for (;;) {
    Status paused = set_move(session, move, v1::SetVolumeMoveRequest::PAUSE);
    bool in_use = paused.code() == Code::kFailedPrecondition &&
                  paused.message().find("is in use") != std::string::npos;
    if (!in_use) return paused;
    if (std::chrono::steady_clock::now() >= give_up) {
      return error(Code::kFailedPrecondition,
                   "{}; nothing was moved: disconnect it (or unpublish it) first, or give "
                   "--wait-unpublished SECONDS to wait for that after the pre-copy",
                   paused.message());
    }
    if (!told) {
      say_move_step(fmt::format("waiting up to {} s for volume \"{}\" to be disconnected: {}",
                                settings.wait_unpublished, move.name, paused.message()));
      told = true;
    }
    bool soon = std::chrono::steady_clock::now() - began < kMoveInUseSoon;
    std::this_thread::sleep_for(soon ? std::chrono::milliseconds(kMoveInUsePollSoon)
                                     : std::chrono::milliseconds(kMoveInUsePoll));
  }
}

// CreateVolume of the name on B from the last snapshot (which B holds whole by now).
Expected<std::string> create_on_receiver(Session& session, const MovePlan& move,
                                         const std::string& snapshot) {
  csi::v1::CreateVolumeRequest request;
  request.set_name(move.name);
  request.mutable_capacity_range()->set_required_bytes(move.volume.capacity_bytes());
  (*request.mutable_parameters())["provider"] = "local";
  request.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(snapshot);
  csi::v1::VolumeCapability capability = attach_capability(move.volume);
  if (capability.has_mount()) capability.mutable_mount()->set_fs_type("");
  *request.add_volume_capabilities() = capability;
  auto* requirement = request.mutable_accessibility_requirements();
  (*requirement->add_requisite()->mutable_segments())[kTopologyNodeKey] = move.to;
  *requirement->add_preferred() = requirement->requisite(0);
  csi::v1::CreateVolumeResponse response;
  ROSETCTL_RETURN_IF_ERROR(session.client().controller(
      &csi::v1::Controller::Stub::CreateVolume, request, &response, CsiClient::kDataCallDeadline));
  return response.volume().volume_id();
}

// Whether a CreateVolume that failed so may have been made all the same: its answer was lost.
bool outcome_unknown(const Status& status) {
  switch (status.code()) {
    case Code::kUnavailable:
    case Code::kDeadlineExceeded:
    case Code::kCancelled:
    case Code::kUnknown:
    case Code::kAborted:
      return true;
    default:
      return false;
  }
}

std::string rerun_hint(const MovePlan& move) {
  return fmt::format("run `rosetctl volume move {} --to-node {}` again to finish it", move.old_id,
                     move.to);
}

nlohmann::json null_or(const std::optional<std::string>& text) {
  return text ? nlohmann::json(*text) : nlohmann::json(nullptr);
}

}  // namespace

std::optional<MoveCondition> move_state_of(const VolumeInfo& info) {
  if (!info.abnormal) return std::nullopt;
  return parse_move_condition(info.condition);
}

Expected<nlohmann::json> move_volume(Session& session, const VolumeInfo& info,
                                     const MoveSettings& settings) {
  MovePlan move;
  ROSETCTL_RETURN_IF_ERROR(plan_move(session, info, settings.to_node, &move));
  std::optional<MoveCondition> earlier = move_state_of(info);
  if (earlier && earlier->to_node != move.to) {
    return error(
        Code::kFailedPrecondition,
        "volume \"{}\" is {} node \"{}\"{}: run its move to that node again ({}) to "
        "finish it",
        move.name, earlier->moved ? "moved to" : "paused while it moves to", earlier->to_node,
        earlier->moved ? fmt::format(" as {}", earlier->new_volume_id) : "",
        fmt::format("rosetctl volume move {} --to-node {}", move.old_id, earlier->to_node));
  }
  std::optional<std::string> resumed;
  if (earlier) resumed = earlier->moved ? "moved" : "paused";
  // Refused before any copy: its CreateVolume there would be. A move begun earlier goes on
  // (that CreateVolume answers it if it was made).
  if (!earlier && move.to_cordoned) return cordoned_error(move.to);
  auto left = move_snapshots_left(session, move);
  if (!left) return left.status();
  std::vector<std::string> snapshots;
  if (!earlier) {
    // Taken before writes that went on since: a pre-copy must not stop on one of them.
    if (!left->ids.empty())
      say_move_step(
          fmt::format("removing {} snapshot(s) an earlier move of "
                      "volume \"{}\" left",
                      left->ids.size(), move.name));
    if (!remove_move_snapshots(session, move, left->ids)) {
      return error(Code::kUnavailable,
                   "the snapshots an earlier move of volume \"{}\" left on node \"{}\" could not "
                   "be removed; nothing was moved: try again",
                   move.name, move.from.node);
    }
  } else {
    say_move_step(fmt::format("volume \"{}\" was {} node \"{}\" by an earlier run: going on",
                              move.name, earlier->moved ? "moved to" : "paused for its move to",
                              move.to));
    snapshots = left->ids;  // removed at the end, as this run's
  }

  std::vector<PreCopyRound> rounds;
  std::optional<PreCopyRound> delta;
  std::string new_id;
  int64_t pause_ms = 0;
  if (earlier && earlier->moved) {
    new_id = earlier->new_volume_id;
  } else {
    // Pre-copy, while the volume stays in use on A (not again once it is paused: nothing
    // changes then). A failure before the pause leaves the volume as it was and takes the move's
    // snapshots away again.
    auto forget = [&](Status failed) {
      remove_move_snapshots(session, move, snapshots);
      return failed;
    };
    // One round: a snapshot of A (a file written meanwhile kept as read), and B pulls it.
    auto pre_copy_round = [&]() -> Status {
      int round = static_cast<int>(rounds.size()) + 1;
      auto snapshot = take_move_snapshot(session, move, fmt::format("{}-{}", move.run, round),
                                         MoveSnapshot::kPreCopy);
      if (!snapshot) return snapshot.status();
      snapshots.push_back(*snapshot);
      auto pulled = pull_to_receiver(session, move, *snapshot);
      if (!pulled) return pulled.status();
      rounds.push_back(*pulled);
      say_move_step(fmt::format("volume \"{}\": pre-copy round {}: {} sent to node \"{}\"",
                                move.name, round, approximate_size(pulled->bytes_sent), move.to));
      return Status::ok();
    };
    for (int round = 1; !earlier && round <= settings.max_rounds; ++round) {
      if (Status done = pre_copy_round(); !done) return forget(done);
      crash_point("volume-move-pre-copied");
      if (rounds.back().bytes_sent <= settings.small) break;
    }
    // B holds the last round whole (and A the files' objects in it): the earlier rounds only
    // hold objects it has, or ones that changed since. Removed now, before the pause, so the
    // cleanup after the switch (which the user waits for) has only the last round and the final
    // snapshot to remove.
    if (snapshots.size() > 1) {
      std::vector<std::string> earlier_rounds(snapshots.begin(), snapshots.end() - 1);
      if (remove_move_snapshots(session, move, earlier_rounds))
        snapshots.erase(snapshots.begin(), snapshots.end() - 1);
    }
    if (!rounds.empty()) {
      auto prepared = pull_to_receiver(session, move, rounds.back().snapshot, true);
      if (!prepared) return forget(prepared.status());
      say_move_step(fmt::format("volume \"{}\": node \"{}\" restored the last round ahead",
                                move.name, move.to));
      // The writes during that restore (a big volume's takes seconds) travel now, not in the
      // pause: one more round, kept with the one restored ahead (the final delta's restore
      // finds that one among its snapshot's ancestors).
      if (Status done = pre_copy_round(); !done) return forget(done);
    }

    if (Status paused = pause_on_source(session, move, settings); !paused) return forget(paused);
    auto paused_at = std::chrono::steady_clock::now();
    say_move_step(
        fmt::format("volume \"{}\" is paused on node \"{}\": taking the last delta to "
                    "node \"{}\"",
                    move.name, move.from.node, move.to));
    crash_point("volume-move-paused");
    // Until the switch, a failure gives the volume back to A once A's "final" snapshot is gone
    // (a later run must not take up one that writes after this pause have made stale).
    auto undo = [&](Status failed) {
      if (!remove_move_snapshots(session, move, snapshots)) {
        return failed.with_context(fmt::format(
            "volume \"{}\" stays paused on node \"{}\" (its move's snapshots there could not be "
            "removed); {}",
            move.name, move.from.node, rerun_hint(move)));
      }
      crash_point("volume-move-undone-snapshots");
      Status resumed_here = set_move(session, move, v1::SetVolumeMoveRequest::CANCEL);
      if (!resumed_here) {
        return failed.with_context(fmt::format(
            "volume \"{}\" is still paused on node \"{}\" (ending the pause failed: {}); {}",
            move.name, move.from.node, resumed_here.message(), rerun_hint(move)));
      }
      return failed.with_context(
          fmt::format("volume \"{}\" stays on node \"{}\", unpaused", move.name, move.from.node));
    };
    // Paused by an earlier run that took it: that one (nothing was written since).
    std::string final_step = fmt::format("final-{}", move.run);
    if (earlier && left->final_name)
      final_step = left->final_name->substr(move_snapshot_prefix(move).size());
    auto last = take_move_snapshot(session, move, final_step, MoveSnapshot::kFinal);
    if (!last) return undo(last.status());
    if (std::find(snapshots.begin(), snapshots.end(), *last) == snapshots.end())
      snapshots.push_back(*last);
    crash_point("volume-move-final-taken");
    auto pulled = pull_to_receiver(session, move, *last);
    if (!pulled) return undo(pulled.status());
    delta = *pulled;
    auto made = create_on_receiver(session, move, *last);
    if (!made && outcome_unknown(made.status())) {
      // B may hold the volume: ending the pause could leave two copies that take writes.
      return made.status().with_context(fmt::format(
          "volume \"{}\" stays paused on node \"{}\" (node \"{}\" may have made it); {}", move.name,
          move.from.node, move.to, rerun_hint(move)));
    }
    if (!made) return undo(made.status());
    new_id = *made;
    crash_point("volume-move-created");
    Status switched = set_move(session, move, v1::SetVolumeMoveRequest::FINISH, new_id);
    if (!switched) {
      // B holds the volume, A is paused: neither takes writes for it until a run finishes.
      return switched.with_context(fmt::format(
          "volume \"{}\" is made on node \"{}\" ({}) but node \"{}\" did not record the switch; "
          "{} (naming the old id: the name is on both nodes until then)",
          move.name, move.to, new_id, move.from.node, rerun_hint(move)));
    }
    pause_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - paused_at)
                   .count();
    crash_point("volume-move-switched");
    say_move_step(
        fmt::format("volume \"{}\" is switched to node \"{}\" as {}: removing the "
                    "move's snapshots",
                    move.name, move.to, new_id));
  }
  // Listed again: a copy on B that an earlier run could not remove is found once B answers
  // (the listing at the start leaves out a node that did not answer then).
  if (auto rest = move_snapshots_left(session, move)) {
    for (const std::string& id : rest->ids) {
      if (std::find(snapshots.begin(), snapshots.end(), id) == snapshots.end())
        snapshots.push_back(id);
    }
  }
  remove_move_snapshots(session, move, snapshots);

  bool deleted = false;
  if (settings.delete_source) {
    csi::v1::DeleteVolumeRequest remove;
    remove.set_volume_id(move.old_id);
    csi::v1::DeleteVolumeResponse removed;
    ROSETCTL_RETURN_IF_ERROR(
        session.client()
            .controller(&csi::v1::Controller::Stub::DeleteVolume, remove, &removed)
            .with_context(fmt::format("the move is done, but its old copy {} on node \"{}\" "
                                      "stays",
                                      move.old_id, move.from.node)));
    deleted = true;
  }
  nlohmann::json each = nlohmann::json::array();
  for (const PreCopyRound& round : rounds)
    each.push_back({{"bytes_sent", round.bytes_sent}, {"objects_sent", round.objects_sent}});
  return nlohmann::json{{"name", move.name},
                        {"volume_id", new_id},
                        {"node", move.to},
                        {"from_node", move.from.node},
                        {"old_volume_id", move.old_id},
                        {"rounds", each},
                        {"final_bytes_sent", delta ? delta->bytes_sent : 0},
                        {"pause_ms", pause_ms},
                        {"source_deleted", deleted},
                        {"resumed", null_or(resumed)}};
}

std::string move_summary(const nlohmann::json& moved) {
  std::string where =
      moved["source_deleted"].get<bool>()
          ? fmt::format("its old copy on node \"{}\" is deleted",
                        moved["from_node"].get<std::string>())
          : fmt::format("its old copy {} on node \"{}\" is kept (rosetctl volume delete {})",
                        moved["old_volume_id"].get<std::string>(),
                        moved["from_node"].get<std::string>(),
                        moved["old_volume_id"].get<std::string>());
  if (moved["resumed"] == "moved") {
    return fmt::format("volume \"{}\" lives on node \"{}\" as {} (moved by an earlier run); {}",
                       moved["name"].get<std::string>(), moved["node"].get<std::string>(),
                       moved["volume_id"].get<std::string>(), where);
  }
  return fmt::format(
      "volume \"{}\" lives on node \"{}\" as {} ({} pre-copy round(s), last delta {}, paused "
      "{} ms); {}",
      moved["name"].get<std::string>(), moved["node"].get<std::string>(),
      moved["volume_id"].get<std::string>(), moved["rounds"].size(),
      approximate_size(moved["final_bytes_sent"].get<int64_t>()), moved["pause_ms"].get<int64_t>(),
      where);
}

}  // namespace rosetctl::cli
