// `rosetctl volume move VOL --to-node B`: the options, and the move (cli/volume_move.h) of the
// volume named.
#include "cli/render.h"
#include "cli/session.h"
#include "cli/volume_cmd.h"
#include "cli/volume_move.h"
#include "core/size.h"
#include "core/validate.h"

namespace rosetctl::cli {
namespace {

struct VolumeMoveOptions {
  std::string volume;
  std::string to_node;
  bool delete_source = false;
  int wait_unpublished = 0;  // seconds
  int max_rounds = 4;
  std::string small = "16Mi";
};

}  // namespace

// The settings of a move from its options (`node drain` takes the same ones).
Expected<MoveSettings> move_settings(const std::string& to_node, bool delete_source,
                                     int wait_unpublished, int max_rounds,
                                     const std::string& small) {
  auto bytes = parse_size(small);
  if (!bytes) return bytes.status().with_context("--small");
  if (max_rounds < 1 || max_rounds > 20) {
    return error(Code::kInvalidArgument, "--max-rounds {} is out of range: 1 to 20", max_rounds);
  }
  if (wait_unpublished < 0) {
    return error(Code::kInvalidArgument, "--wait-unpublished {} is no number of seconds",
                 wait_unpublished);
  }
  return MoveSettings{to_node, delete_source, wait_unpublished, max_rounds, *bytes};
}

namespace {

Status run_move(const GlobalOptions& globals, const VolumeMoveOptions& options) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.to_node, "--to-node"));
  auto settings = move_settings(options.to_node, options.delete_source, options.wait_unpublished,
                                options.max_rounds, options.small);
  if (!settings) return settings.status();
  auto session = Session::open(globals);
  if (!session) return session.status();
  if ((*session)->sees_only_this_host()) {
    return error(Code::kFailedPrecondition, "volume move runs from the controller seat: {}",
                 kOnlyThisHostHint);
  }
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  auto moved = move_volume(**session, *info, *settings);
  if (!moved) return moved.status();
  print_line_or_json(globals.output, move_summary(*moved), *moved);
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
      "Resumable: after a failure or a kill of any party (this CLI, either node's serve, the\n"
      "controller) at any step, run the move again naming the old id: it goes on from where\n"
      "the volume is. Not yet paused: snapshots a killed run left are removed and the move\n"
      "starts over. Paused: the pre-copy is skipped and the move goes on from the pause (JSON\n"
      "resumed \"paused\"). Moved: only the cleanup is left (resumed \"moved\"). A failure after\n"
      "the pause gives the volume back to A, unpaused, unless B may have made it (its answer\n"
      "was lost) or A's last snapshot could not be removed: then it stays paused, and the\n"
      "error says to run the move again.\n\n"
      "What works: local directory and image volumes placed on a registered node, moved to\n"
      "another registered node, run from the controller seat (--controller with an admin's\n"
      "certificate, or the controller host's CLI); `node drain` moves every volume of a node\n"
      "this way. A node that is cordoned (`rosetctl node cordon`) takes no moved volume: a new\n"
      "move onto it is refused before any copy, exit code 8. Not yet (refused with a clear error, "
      "or not offered): an image volume kept in\n"
      "use across the pause under fsfreeze (it must be disconnected, as a directory volume);\n"
      "moving off or onto the controller host; rebinding a Kubernetes claim for you (a\n"
      "PersistentVolume's node affinity cannot change: the claim is bound to the moved volume\n"
      "by hand, docs/guides/kubernetes.md \"Moving a volume to another node\").\n\n"
      "Example:\n  rosetctl --controller ctl:9443 volume move data --to-node node-b "
      "--wait-unpublished 60 -o json");
  move->callback([&globals, &action, options] {
    action = [&globals, options] { return run_move(globals, *options); };
  });
}

}  // namespace rosetctl::cli
