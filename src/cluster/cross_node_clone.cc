// A clone of a volume that lives on node A (or on the controller host), made on node B
// (docs/guides/across-hosts.md, "Moving snapshots between nodes"): content moves between nodes only
// as snapshots do (cluster/snapshot_pull.h), so the controller snapshots the volume on A, has B
// make the volume from that snapshot, and removes the snapshot from both nodes afterwards. Three
// CSI calls to the nodes, each the very call a user could make; B records the volume as a clone of
// A's volume, so a repeated CreateVolume is answered by name on B like any other.
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "cluster/peer_authority.h"
#include "cluster/placed_fields.h"
#include "cluster/routing_controller.h"
#include "core/commit_store/sha256.h"
#include "core/crash_point.h"
#include "core/validate.h"
#include "daemon/volume_locks.h"

namespace rosetctl {
namespace {

// How long the controller waits between asking whether the snapshot is ready.
constexpr std::chrono::milliseconds kReadyPoll{200};

// The same clone gets the same snapshot name every time, so a retry after the controller or a
// node stopped midway takes up the snapshot already there (CreateSnapshot is idempotent by
// name) rather than taking another beside it.
std::string clone_snapshot_name(const std::string& node, const std::string& volume_name,
                                const std::string& source_id) {
  return fmt::format(
      "clone-{}",
      sha256_hex(fmt::format("{}\n{}\n{}", node, volume_name, source_id)).substr(0, 32));
}

}  // namespace

std::string RoutingController::clone_by_snapshot(const grpc::CallbackServerContext& call) {
  auto found = call.client_metadata().find(kCloneBySnapshotKey);
  if (found == call.client_metadata().end()) return "";
  // Only a controller names one (a node takes CreateVolume from no one else anyway); from any
  // other caller the key means nothing.
  if (peer_of(call).role != PeerRole::kController) return "";
  return std::string(found->second.data(), found->second.size());
}

Expected<std::string> RoutingController::snapshot_for_clone(
    const PlacedId& source, const std::string& node, const csi::v1::CreateVolumeRequest& request) {
  const std::string& source_id = request.volume_content_source().volume().volume_id();
  csi::v1::CreateSnapshotRequest take;
  take.set_source_volume_id(source_id);
  take.set_name(clone_snapshot_name(node, request.name(), source_id));
  (*take.mutable_parameters())["message"] =
      fmt::format("taken to clone this volume as \"{}\" on node \"{}\"; removed once that is done",
                  request.name(), node);
  auto give_up = std::chrono::steady_clock::now() + NodeControllers::kDataPatience;
  for (;;) {
    csi::v1::CreateSnapshotResponse taken;
    Status status = Status::ok();
    if (source.node == context_.options.node_id) {
      // A volume of this host: snapshotted here, named for the node with this host's id.
      take.set_source_volume_id(source.local_id);
      status = here_.create_snapshot(take, &taken);
      if (status) status = place_ids(taken, source.node);
    } else {
      // CSI: NOT_FOUND when the source of a CreateVolume does not exist; a node nobody
      // registered holds nothing.
      status = nodes_.call(source.node, &csi::v1::Controller::Stub::CreateSnapshot, take, &taken,
                           Code::kNotFound, NodeControllers::kDataPatience);
    }
    if (!status) {
      return status.with_context(fmt::format(
          "volume_content_source: volume {} (snapshotting it on node \"{}\" to clone it)",
          source_id, source.node));
    }
    // A snapshot answers before it is ready when it takes long; asking again by name waits on.
    if (taken.snapshot().ready_to_use()) return taken.snapshot().snapshot_id();
    if (std::chrono::steady_clock::now() > give_up) {
      return error(Code::kDeadlineExceeded,
                   "volume_content_source: volume {}: its snapshot on node \"{}\" for the "
                   "clone did not become ready",
                   source_id, source.node);
    }
    std::this_thread::sleep_for(kReadyPoll);
  }
}

bool RoutingController::remove_clone_snapshot(const PlacedId& snapshot, const std::string& node) {
  // B's copy first (it holds the same local id: snapshot_pull.h), then the original on A. Each
  // is idempotent; one that fails (a node gone) is named in the log and stays until taken up
  // again (collect_clone_leftovers) or by a retry of the same clone.
  bool all_gone = true;
  for (const std::string& holder : {node, snapshot.node}) {
    auto id = encode_placed_id(holder, snapshot.local_id);
    if (!id) continue;
    csi::v1::DeleteSnapshotRequest remove;
    csi::v1::DeleteSnapshotResponse removed;
    Status status = Status::ok();
    if (holder == context_.options.node_id) {
      remove.set_snapshot_id(snapshot.local_id);
      status = here_.delete_snapshot(remove);
    } else {
      remove.set_snapshot_id(*id);
      status = nodes_.call(holder, &csi::v1::Controller::Stub::DeleteSnapshot, remove, &removed,
                           Code::kUnavailable);
    }
    if (!status) {
      all_gone = false;
      spdlog::warn("the snapshot {} taken for a clone was not removed from node \"{}\": {}", *id,
                   holder, escape_text(status.message()));
    }
  }
  return all_gone;
}

void RoutingController::collect_clone_leftovers() {
  for (const CloneLeftover& leftover : clone_intents_.list()) {
    // A clone still at work (another process of this host) holds its name: not a leftover.
    auto busy =
        context_.locks.try_lock(fmt::format("clone:{}:{}", leftover.receiver, leftover.volume_name),
                                LockMode::kExclusive, "clone in flight");
    auto snapshot = decode_placed_id(leftover.snapshot_id);
    if (!busy || !snapshot) continue;
    spdlog::info("removing snapshot {} of an interrupted clone of \"{}\" onto node \"{}\"",
                 leftover.snapshot_id, leftover.volume_name, leftover.receiver);
    if (remove_clone_snapshot(*snapshot, leftover.receiver)) clone_intents_.forget(leftover.file);
  }
}

void RoutingController::collect_clone_leftovers_later() {
  if (clone_intents_.list().empty()) return;  // the usual case: no thread for nothing
  background_.start([this] { collect_clone_leftovers(); });
}

Status RoutingController::clone_on_node(const std::string& node, const PlacedId& source,
                                        const csi::v1::CreateVolumeRequest& request,
                                        const CreateChecks* checked,
                                        csi::v1::CreateVolumeResponse* response) {
  // One clone of a name at a time, for the whole of it: a CO's retry arriving while the first
  // call still copies would otherwise take up the same snapshot and, when B turns it away as
  // busy, remove that snapshot from under the first (B's copy, held by the restore, would stay).
  auto clone_lock = context_.locks.try_lock(
      fmt::format("clone:{}:{}", node, request.name()), LockMode::kExclusive,
      busy_message(
          fmt::format("volume name \"{}\" (being cloned onto node \"{}\")", request.name(), node)));
  if (!clone_lock) return clone_lock.status();
  auto snapshot_id = snapshot_for_clone(source, node, request);
  if (!snapshot_id) return snapshot_id.status();
  auto snapshot = decode_placed_id(*snapshot_id);
  if (!snapshot || snapshot->node != source.node) {
    return error(Code::kInternal, "node \"{}\" answered CreateSnapshot with id {}", source.node,
                 *snapshot_id);
  }
  // From here a kill leaves the snapshot: say so where the next start of serve looks.
  auto intent = clone_intents_.record(*snapshot_id, node, request.name());
  if (!intent) {
    spdlog::warn("no record of the clone's snapshot {}: {}", *snapshot_id,
                 escape_text(intent.status().message()));
  }
  crash_point("clone-snapshot-taken");
  // B reads the snapshot on A under a grant of this transfer; the controller host reads with
  // its own certificate, which needs none.
  Status created = Status::ok();
  if (node == context_.options.node_id) {
    if (checked != nullptr) {
      created = here_.create_volume(request, *checked, response, *snapshot_id);
    } else if (auto checked_here = here_.create_checks(request); !checked_here) {
      created = checked_here.status();
    } else {
      created = here_.create_volume(request, *checked_here, response, *snapshot_id);
    }
  } else {
    auto metadata = grant_transfer(node, *snapshot);
    metadata.emplace(kCloneBySnapshotKey, *snapshot_id);
    created = nodes_.call(node, &csi::v1::Controller::Stub::CreateVolume, request, response,
                          Code::kResourceExhausted, NodeControllers::kDataPatience, metadata);
  }
  // Made or not, this snapshot has done its part: a retry takes another, and B skips whatever
  // objects it verified before (content addressing), so removing it loses no work done.
  if (remove_clone_snapshot(*snapshot, node) && intent) clone_intents_.forget(*intent);
  collect_clone_leftovers_later();  // another clone's, when its controller was killed
  return created;
}

}  // namespace rosetctl
