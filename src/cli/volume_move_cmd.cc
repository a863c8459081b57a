// `rosetctl volume move VOL --to-node B`: a local volume placed on node A made to live on node B
// under its name, with calls a user could make from the controller seat, in order:
//
//   pre-copy  CreateSnapshot of the volume on A, PullSnapshot of it into B (only what B lacks),
//             again until a round sends little (the volume stays in use on A meanwhile);
//   pause     Catalog/SetVolumeMove PAUSE on A: no new publication, refused while anything
//             holds the volume (--wait-unpublished waits for the last writer to let go);
//   delta     one more snapshot on A, pulled into B, and CreateVolume of the name on B from it;
//   switch    SetVolumeMove FINISH on A: A's copy answers with the new id and its name is B's.
//
// So there is never a second copy that takes writes: A's takes no new publication from the
// pause on, and was published nowhere when it paused. A failure before the switch ends the pause
// (the volume stays A's); one after the create leaves A paused, and running the move again
// finishes it (every step is idempotent by name). The snapshots are removed from both nodes at
// the end.
#include <spdlog/fmt/fmt.h>

#include <chrono>
#include <thread>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/snapshot_move.h"
#include "cli/terminal_progress.h"
#include "cli/volume_cmd.h"
#include "cli/volume_lookup.h"
#include "cluster/placed_id.h"
#include "core/commit_store/sha256.h"
#include "core/crash_point.h"
#include "core/size.h"
#include "core/validate.h"
#include "daemon/convert.h"
#include "providers/provider_registration.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {
namespace {

constexpr std::chrono::milliseconds kMoveSnapshotPoll{100};
constexpr std::chrono::seconds kMoveInUsePoll{1};

struct VolumeMoveOptions {
  std::string volume;
  std::string to_node;
  bool delete_source = false;
  int wait_unpublished = 0;  // seconds
  int max_rounds = 4;
  std::string small = "16Mi";
};

struct PreCopyRound {
  std::string snapshot;  // A's placed id
  int64_t bytes_sent = 0;
  int64_t objects_sent = 0;
};

// The move's plan: what it moves, from where, to where.
struct MovePlan {
  std::string name;
  std::string old_id;
  PlacedId from;
  std::string to;
  std::string tag;  // the same for every run of this move: its snapshots' names repeat
  csi::v1::Volume volume;
};

// Each step on stderr, in JSON output too: a move takes a while, and its wait for the last
// user is what the operator must act on.
void say_step(const std::string& line) {
  std::fprintf(stderr, "rosetctl: %s\n", line.c_str());
}

Status check_movable(Session& session, const VolumeMoveOptions& options, const VolumeInfo& info,
                     MovePlan* move) {
  const csi::v1::Volume& volume = info.volume;
  move->volume = volume;
  move->old_id = volume.volume_id();
  move->name = volume_name(volume);
  move->to = options.to_node;
  auto provider = volume.volume_context().find(kContextProvider);
  std::string kind = provider == volume.volume_context().end() ? "" : provider->second;
  const ProviderRegistration* registration = find_registration(kind);
  if (registration != nullptr && !registration->not_moved_because.empty()) {
    return error(Code::kFailedPrecondition, "volume \"{}\" is a {} volume: {}", move->name, kind,
                 registration->not_moved_because);
  }
  auto placed = decode_placed_id(move->old_id);
  if (!placed) {
    return error(Code::kUnimplemented,
                 "volume \"{}\" ({}) lives on the controller host: moving a volume off the "
                 "controller host is not done yet; only volumes placed on a node move",
                 move->name, move->old_id);
  }
  move->from = *placed;
  if (placed->node == options.to_node) {
    return error(Code::kInvalidArgument, "volume \"{}\" is on node \"{}\" already", move->name,
                 options.to_node);
  }
  v1::GetNodeRequest asked;
  asked.set_node_id(options.to_node);
  v1::GetNodeResponse node;
  Status known = session.client().registry(&v1::Registry::Stub::GetNode, asked, &node);
  if (known.code() == Code::kNotFound) {
    return error(Code::kNotFound,
                 "--to-node \"{}\" is not a registered node (`rosetctl node list` lists them; "
                 "moving onto the controller host is not done yet)",
                 options.to_node);
  }
  ROSETCTL_RETURN_IF_ERROR(known);
  move->tag = sha256_hex(fmt::format("{}\n{}", move->old_id, move->to)).substr(0, 16);
  return Status::ok();
}

// A snapshot of the volume on A, ready; its placed id.
Expected<std::string> take_move_snapshot(Session& session, const MovePlan& move,
                                         const std::string& step) {
  csi::v1::CreateSnapshotRequest request;
  request.set_source_volume_id(move.old_id);
  request.set_name(fmt::format("move-{}-{}", move.tag, step));
  (*request.mutable_parameters())["message"] = fmt::format(
      "taken to move volume \"{}\" to node \"{}\"; removed once that is done", move.name, move.to);
  csi::v1::CreateSnapshotResponse response;
  for (;;) {
    ROSETCTL_RETURN_IF_ERROR(session.client().controller(&csi::v1::Controller::Stub::CreateSnapshot,
                                                         request, &response,
                                                         CsiClient::kDataCallDeadline));
    if (response.snapshot().ready_to_use()) return response.snapshot().snapshot_id();
    std::this_thread::sleep_for(kMoveSnapshotPoll);
  }
}

// B pulls the snapshot from A: only the objects it lacks travel.
Expected<PreCopyRound> pull_to_receiver(Session& session, const MovePlan& move,
                                        const std::string& snapshot) {
  auto placed = decode_placed_id(snapshot);
  if (!placed) return error(Code::kInternal, "snapshot id {} names no node", snapshot);
  v1::PullSnapshotRequest request;
  request.set_node_id(move.to);
  request.set_from_node_id(move.from.node);
  request.set_reference(placed->local_id);
  auto done = pull_into(session, move.to, request);
  if (!done) return done.status();
  return PreCopyRound{snapshot, done->bytes_sent(), done->objects_sent()};
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
Status pause_on_source(Session& session, const MovePlan& move, const VolumeMoveOptions& options) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(options.wait_unpublished);
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
      say_step(fmt::format("waiting up to {} s for volume \"{}\" to be disconnected: {}",
                           options.wait_unpublished, move.name, paused.message()));
      told = true;
    }
    std::this_thread::sleep_for(kMoveInUsePoll);
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

// The move's snapshots, from B (its pulled copies) and A; a failure is a note, not the move's.
void remove_move_snapshots(Session& session, const MovePlan& move,
                           const std::vector<std::string>& snapshots) {
  for (const std::string& snapshot : snapshots) {
    auto placed = decode_placed_id(snapshot);
    if (!placed) continue;
    for (const std::string& holder : {move.to, move.from.node}) {
      auto id = encode_placed_id(holder, placed->local_id);
      if (!id) continue;
      csi::v1::DeleteSnapshotRequest request;
      request.set_snapshot_id(*id);
      csi::v1::DeleteSnapshotResponse response;
      Status removed = session.client().controller(&csi::v1::Controller::Stub::DeleteSnapshot,
                                                   request, &response);
      if (!removed) {
        std::fprintf(stderr, "rosetctl: note: the move's snapshot %s stays: %s\n", id->c_str(),
                     removed.message().c_str());
      }
    }
  }
}

Status run_move(const GlobalOptions& globals, const VolumeMoveOptions& options) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.to_node, "--to-node"));
  auto small = parse_size(options.small);
  if (!small) return small.status().with_context("--small");
  if (options.max_rounds < 1 || options.max_rounds > 20) {
    return error(Code::kInvalidArgument, "--max-rounds {} is out of range: 1 to 20",
                 options.max_rounds);
  }
  if (options.wait_unpublished < 0) {
    return error(Code::kInvalidArgument, "--wait-unpublished {} is no number of seconds",
                 options.wait_unpublished);
  }
  auto session = Session::open(globals);
  if (!session) return session.status();
  if ((*session)->sees_only_this_host()) {
    return error(Code::kFailedPrecondition, "volume move runs from the controller seat: {}",
                 kOnlyThisHostHint);
  }
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  MovePlan move;
  ROSETCTL_RETURN_IF_ERROR(check_movable(**session, options, *info, &move));

  // Pre-copy, while the volume stays in use on A. A failure before the pause leaves the volume
  // as it was and takes the move's snapshots away again.
  std::vector<PreCopyRound> rounds;
  std::vector<std::string> snapshots;
  auto forget = [&](Status failed) {
    remove_move_snapshots(**session, move, snapshots);
    return failed;
  };
  for (int round = 1; round <= options.max_rounds; ++round) {
    auto snapshot = take_move_snapshot(**session, move, std::to_string(round));
    if (!snapshot) return forget(snapshot.status());
    snapshots.push_back(*snapshot);
    auto pulled = pull_to_receiver(**session, move, *snapshot);
    if (!pulled) return forget(pulled.status());
    rounds.push_back(*pulled);
    say_step(fmt::format("pre-copy round {}: {} sent to node \"{}\"", round,
                         approximate_size(pulled->bytes_sent), move.to));
    if (pulled->bytes_sent <= *small) break;
  }

  if (Status paused = pause_on_source(**session, move, options); !paused) return forget(paused);
  auto paused_at = std::chrono::steady_clock::now();
  crash_point("volume-move-paused");
  // Until the switch, a failure gives the volume back to A, and removes the move's snapshots: a
  // later run must not take up a "final" one that writes after this pause have made stale.
  auto undo = [&](Status failed) {
    Status resumed = set_move(**session, move, v1::SetVolumeMoveRequest::CANCEL);
    if (!resumed) {
      return failed.with_context(fmt::format(
          "volume \"{}\" is still paused on node \"{}\" (ending the pause failed: {}); run the "
          "move again, naming {}, to finish it",
          move.name, move.from.node, resumed.message(), move.old_id));
    }
    remove_move_snapshots(**session, move, snapshots);
    return failed.with_context(
        fmt::format("volume \"{}\" stays on node \"{}\", unpaused", move.name, move.from.node));
  };
  auto last = take_move_snapshot(**session, move, "final");
  if (!last) return undo(last.status());
  snapshots.push_back(*last);
  auto delta = pull_to_receiver(**session, move, *last);
  if (!delta) return undo(delta.status());
  auto new_id = create_on_receiver(**session, move, *last);
  if (!new_id) return undo(new_id.status());
  crash_point("volume-move-created");
  Status switched = set_move(**session, move, v1::SetVolumeMoveRequest::FINISH, *new_id);
  if (!switched) {
    // B holds the volume, A is paused: neither takes writes for it until a run finishes.
    return switched.with_context(fmt::format(
        "volume \"{}\" is made on node \"{}\" ({}) but node \"{}\" did not record the switch; "
        "run `rosetctl volume move {} --to-node {}` again to finish it (naming the old id: the "
        "name is on both nodes until then)",
        move.name, move.to, *new_id, move.from.node, move.old_id, move.to));
  }
  auto pause_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - paused_at)
                      .count();
  remove_move_snapshots(**session, move, snapshots);

  bool deleted = false;
  if (options.delete_source) {
    csi::v1::DeleteVolumeRequest remove;
    remove.set_volume_id(move.old_id);
    csi::v1::DeleteVolumeResponse removed;
    ROSETCTL_RETURN_IF_ERROR(
        (*session)
            ->client()
            .controller(&csi::v1::Controller::Stub::DeleteVolume, remove, &removed)
            .with_context(fmt::format("the move is done, but its old copy {} on node \"{}\" "
                                      "stays",
                                      move.old_id, move.from.node)));
    deleted = true;
  }
  nlohmann::json each = nlohmann::json::array();
  for (const PreCopyRound& round : rounds)
    each.push_back({{"bytes_sent", round.bytes_sent}, {"objects_sent", round.objects_sent}});
  std::string text = fmt::format(
      "volume \"{}\" lives on node \"{}\" as {} ({} pre-copy round(s), last delta {}, paused "
      "{} ms); {}",
      move.name, move.to, *new_id, rounds.size(), approximate_size(delta->bytes_sent), pause_ms,
      deleted ? fmt::format("its old copy on node \"{}\" is deleted", move.from.node)
              : fmt::format("its old copy {} on node \"{}\" is kept (rosetctl volume delete {})",
                            move.old_id, move.from.node, move.old_id));
  print_line_or_json(globals.output, text,
                     {{"name", move.name},
                      {"volume_id", *new_id},
                      {"node", move.to},
                      {"from_node", move.from.node},
                      {"old_volume_id", move.old_id},
                      {"rounds", each},
                      {"final_bytes_sent", delta->bytes_sent},
                      {"pause_ms", pause_ms},
                      {"source_deleted", deleted}});
  return Status::ok();
}

}  // namespace

void setup_volume_move(CLI::App& volume, const GlobalOptions& globals, Action& action) {
  auto options = std::make_shared<VolumeMoveOptions>();
  CLI::App* move = volume.add_subcommand(
      "move", "Move a local volume to another node; it keeps its name (from the controller seat)");
  move->add_option("volume", options->volume, "Volume name or id")->required();
  move->add_option("--to-node", options->to_node, "The registered node to move it to")->required();
  move->add_flag("--delete-source", options->delete_source,
                 "Delete the old copy on the source node once the move is done (default: keep "
                 "it, taking no publication, until `volume delete OLD_ID`)");
  move->add_option("--wait-unpublished", options->wait_unpublished,
                   "Seconds to wait, after the pre-copy, for the volume to be disconnected on "
                   "its node (default 0: refuse at once while it is in use)");
  move->add_option("--max-rounds", options->max_rounds,
                   "Pre-copy rounds at most before the pause (default 4)");
  move->add_option("--small", options->small,
                   "A pre-copy round that sends at most this much ends the pre-copy (default "
                   "16Mi)");
  move->footer(
      "How: the volume is snapshotted on its node A and node B pulls the snapshot, only what it\n"
      "lacks, while the volume stays in use on A (pre-copy), until a round sends little. Then\n"
      "the volume is paused on A: it takes no new publication, and the pause is refused while\n"
      "it is connected or published anywhere (exit 5 naming where) unless --wait-unpublished\n"
      "waits for its last user to disconnect. The last delta is pulled, the volume is made on B\n"
      "under its name (a new id, printed), and A records where it went: its old id refuses\n"
      "every publication naming the new id, and the name is B's. A's copy stays until\n"
      "--delete-source (or `volume delete OLD_ID`). Never two copies that take writes.\n\n"
      "What works: local directory and image volumes placed on a registered node, moved to\n"
      "another registered node, run from the controller seat (--controller with an admin's\n"
      "certificate, or the controller host's CLI). Not yet (refused with a clear error, or not\n"
      "offered): an image volume kept in use across the pause under fsfreeze (it must be\n"
      "disconnected, as a directory volume); moving off or onto the controller host; resuming\n"
      "a killed move at every step (running it again finishes one killed after the pause or\n"
      "the create, and a failure before the switch ends the pause); `node drain`; replicas; a\n"
      "Kubernetes PersistentVolume (its node affinity cannot change: the claim must be bound to\n"
      "a new volume by hand).\n\n"
      "Example:\n  rosetctl --controller ctl:9443 volume move data --to-node node-b "
      "--wait-unpublished 60 -o json");
  move->callback([&globals, &action, options] {
    action = [&globals, options] { return run_move(globals, *options); };
  });
}

}  // namespace rosetctl::cli
