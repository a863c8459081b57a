// `rosetctl volume replicate VOL --to-node B --every 10m | --off | --now`: a local volume placed
// on node A keeps its latest snapshot on node B, so a node lost for good loses at most one
// interval (issue 38, item 3). The setting is the controller's (Catalog/SetVolumeReplica); its
// replica loop takes each round (cluster/replica_loop.h): a snapshot on A, pulled by B (only
// what B lacks), the previous round's snapshot removed from both once the new one is whole on
// B. `volume show` shows the setting and the last round; `volume create NEW --from-snapshot
// SNAP --node B` restores it without A.
#include <spdlog/fmt/fmt.h>

#include <chrono>
#include <thread>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/terminal_progress.h"
#include "cli/volume_cmd.h"
#include "cli/volume_lookup.h"
#include "cli/volume_view.h"
#include "cluster/placed_id.h"
#include "cluster/replica_schedule.h"
#include "core/clock.h"
#include "core/validate.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {
namespace {

constexpr auto kRoundPoll = std::chrono::milliseconds(200);

struct ReplicateOptions {
  std::string volume;
  std::string to_node;
  std::string every;
  bool off = false;
  bool now = false;
  int wait = 600;  // seconds --now waits for the round
};

// The refusals that need no call: what was given, and what kind of volume it is.
Status check_request(const ReplicateOptions& options) {
  bool setting = !options.to_node.empty() || !options.every.empty();
  if (options.off && (setting || options.now)) {
    return error(Code::kInvalidArgument, "--off takes no --to-node, --every or --now");
  }
  if (!options.off && !options.now && !setting) {
    return error(Code::kInvalidArgument,
                 "say what to do: --to-node NODE --every INTERVAL, --now or --off");
  }
  if (setting && (options.to_node.empty() || options.every.empty())) {
    return error(Code::kInvalidArgument, "--to-node and --every go together");
  }
  if (!options.to_node.empty()) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.to_node, "--to-node"));
  }
  if (!options.every.empty())
    ROSETCTL_RETURN_IF_ERROR(replica::parse_every(options.every).status());
  if (options.wait < 1) {
    return error(Code::kInvalidArgument, "--wait {} is no number of seconds", options.wait);
  }
  return Status::ok();
}

Status check_replicable(const VolumeInfo& info) {
  const csi::v1::Volume& volume = info.volume;
  auto provider = volume.volume_context().find(kContextProvider);
  std::string kind = provider == volume.volume_context().end() ? "" : provider->second;
  if (kind != "local") {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is a {} volume: replicas are for local volumes placed on a node "
                 "(a roset volume is bound to no node; an iscsi volume lives on the controller "
                 "host)",
                 volume_name(volume), kind.empty() ? "?" : kind);
  }
  return Status::ok();
}

Expected<std::optional<v1::VolumeReplica>> current_replica(Session& session,
                                                           const std::string& id) {
  v1::GetVolumeDetailsRequest request;
  request.add_volume_ids(id);
  v1::GetVolumeDetailsResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      session.client().catalog(&v1::Catalog::Stub::GetVolumeDetails, request, &response));
  for (const v1::VolumeDetails& details : response.volumes())
    if (details.volume_id() == id && details.has_replica())
      return std::optional<v1::VolumeReplica>(details.replica());
  return std::optional<v1::VolumeReplica>();
}

// Waits for the round the request made due to end: its outcome, or the error it recorded. The
// request set next_due_unix to `due`; the loop claims the round by moving it on (one interval
// after the round's start), so a round already running when it was asked (whose snapshot may be
// older than the request) is not taken for it.
Expected<v1::VolumeReplica> wait_for_round(Session& session, const std::string& id,
                                           v1::VolumeReplica before, int wait_seconds) {
  const int64_t due = before.next_due_unix();
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(wait_seconds);
  for (;;) {
    std::this_thread::sleep_for(kRoundPoll);
    auto now = current_replica(session, id);
    if (!now) return now.status();
    if (!*now) return error(Code::kAborted, "volume {}'s replica was turned off meanwhile", id);
    if ((*now)->next_due_unix() == due) {
      before = **now;  // not taken up yet: what ends meanwhile is an earlier round's
    } else if ((*now)->rounds() > before.rounds()) {
      return **now;
    } else if ((*now)->last_error_unix() != before.last_error_unix() ||
               (*now)->last_error() != before.last_error()) {
      return error(Code::kUnavailable, "the replica round failed (retried every {}): {}",
                   replica::every_text((*now)->every_seconds()), (*now)->last_error());
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      return error(Code::kDeadlineExceeded,
                   "no round of volume {}'s replica ended within {} s; `volume show` tells how "
                   "the next one goes",
                   id, wait_seconds);
    }
  }
}

Status run_replicate(const GlobalOptions& globals, const ReplicateOptions& options) {
  ROSETCTL_RETURN_IF_ERROR(check_request(options));
  auto session = Session::open(globals);
  if (!session) return session.status();
  if ((*session)->sees_only_this_host()) {
    return error(Code::kFailedPrecondition, "volume replicate runs from the controller seat: {}",
                 kOnlyThisHostHint);
  }
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  if (!options.off) ROSETCTL_RETURN_IF_ERROR(check_replicable(*info));
  const std::string& id = info->volume.volume_id();
  std::string name = volume_name(info->volume);

  v1::SetVolumeReplicaRequest request;
  request.set_volume_id(id);
  request.set_off(options.off);
  if (!options.to_node.empty()) {
    request.set_to_node(options.to_node);
    request.set_every_seconds(*replica::parse_every(options.every));
  } else {
    request.set_now(options.now);
  }
  v1::SetVolumeReplicaResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      (*session)->client().catalog(&v1::Catalog::Stub::SetVolumeReplica, request, &response));
  if (options.off) {
    print_line_or_json(
        globals.output,
        fmt::format("volume \"{}\" has no replica now (the last replica snapshot stays where it "
                    "is: `snapshot list` shows it)",
                    name),
        {{"name", name}, {"volume_id", id}, {"replica", nullptr}});
    return Status::ok();
  }
  v1::VolumeReplica replica = response.replica();
  std::string text = fmt::format(
      "volume \"{}\" keeps its latest snapshot on node \"{}\", taken "
      "every {}",
      name, replica.to_node(), replica::every_text(replica.every_seconds()));
  if (options.now) {
    auto ended = wait_for_round(**session, id, replica, options.wait);
    if (!ended) return ended.status();
    replica = *ended;
    text += fmt::format(": snapshot {} is on node \"{}\" ({} sent)", replica.snapshot_id(),
                        replica.to_node(), approximate_size(replica.last_bytes_sent()));
  } else {
    text += " (the first round starts now; `volume show` tells how it went)";
  }
  print_line_or_json(
      globals.output, text,
      {{"name", name}, {"volume_id", id}, {"replica", volume_replica_json(replica)}});
  return Status::ok();
}

}  // namespace

void setup_volume_replicate(CLI::App& volume, const GlobalOptions& globals, Action& action) {
  auto options = std::make_shared<ReplicateOptions>();
  CLI::App* replicate = volume.add_subcommand(
      "replicate",
      "Keep a local volume's latest snapshot on another node, every N minutes (from the "
      "controller seat)");
  replicate->add_option("volume", options->volume, "Volume name or id")->required();
  replicate->add_option("--to-node", options->to_node, "The registered node to keep it on");
  replicate->add_option("--every", options->every,
                        "How often: 90s, 10m, 1h, 1d (at least 2s, at most 7d)");
  replicate->add_flag("--off", options->off,
                      "Stop replicating (the last replica snapshot stays where it is)");
  replicate->add_flag("--now", options->now,
                      "Run a round now and wait for it to end (with --to-node: the first one)");
  replicate->add_option("--wait", options->wait, "Seconds --now waits for the round (default 600)");
  replicate->footer(
      "How: the controller's replica loop (in its `serve`) takes a snapshot of the volume on its\n"
      "node A and has node B pull it, only the objects B lacks, every --every; once the new\n"
      "snapshot is whole on B it removes the previous round's from both nodes, so B always\n"
      "holds one whole replica. A failed round is logged, shown by `volume show` (last success,\n"
      "last error) and tried again one interval after it started. If A is lost for good,\n"
      "`volume create NEW --from-snapshot SNAP --node B` (SNAP: the replica's snapshot id that\n"
      "`volume show` names, on B) restores the volume on B, without A.\n\n"
      "What works: local directory and image volumes placed on a registered node, replicated\n"
      "to another registered node, set from the controller seat (an admin through\n"
      "--controller, or the controller host's CLI). Not yet: replicas of volumes on the\n"
      "controller host or onto it; keeping more than the latest snapshot; a restore under the\n"
      "volume's old name while A's copy is still recorded (give it a new name). A round\n"
      "freezes nothing: a directory volume in use is snapshotted as it is at that moment,\n"
      "file by file. At creation, CreateVolume parameters replicaToNode and replicaEvery (a\n"
      "StorageClass's; `volume create --node A -p replicaToNode=B -p replicaEvery=10m`) set\n"
      "the same.\n\n"
      "Examples:\n"
      "  rosetctl --controller ctl:9443 volume replicate data --to-node node-b --every 10m\n"
      "  rosetctl --controller ctl:9443 volume replicate data --now\n"
      "  rosetctl --controller ctl:9443 volume replicate data --off");
  replicate->callback([&globals, &action, options] {
    action = [&globals, options] { return run_replicate(globals, *options); };
  });
}

}  // namespace rosetctl::cli
