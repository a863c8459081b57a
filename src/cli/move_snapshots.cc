// cli/move_snapshots.h. Each DeleteSnapshot reclaims its node's store there and then (a
// collection that finds the store busy is skipped, left to the next one): a node's removals go
// one after another, and the two nodes', which share nothing, side by side. After a move's
// switch the user waits for this, and reclaiming a volume's worth of objects takes a while.
#include "cli/move_snapshots.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "cli/snapshot_move.h"
#include "cluster/placed_id.h"
#include "csi.grpc.pb.h"
#include "daemon/snapshot_parameters.h"

namespace rosetctl::cli {
namespace {

// The snapshots' copies on HOLDER, one after another; false when one stays.
bool remove_on(Session& session, const std::string& holder,
               const std::vector<std::string>& snapshots) {
  bool all = true;
  for (const std::string& snapshot : snapshots) {
    auto placed = decode_placed_id(snapshot);
    if (!placed) continue;
    auto id = encode_placed_id(holder, placed->local_id);
    if (!id) continue;
    csi::v1::DeleteSnapshotRequest request;
    request.set_snapshot_id(*id);
    csi::v1::DeleteSnapshotResponse response;
    Status removed =
        session.client().controller(&csi::v1::Controller::Stub::DeleteSnapshot, request, &response);
    if (!removed) {
      all = false;
      std::fprintf(stderr, "rosetctl: note: the move's snapshot %s stays: %s\n", id->c_str(),
                   removed.message().c_str());
    }
  }
  return all;
}

}  // namespace

bool remove_snapshot_copies(Session& session, const std::string& source,
                            const std::string& receiver,
                            const std::vector<std::string>& snapshots) {
  if (snapshots.empty()) return true;
  auto on_receiver =
      std::async(std::launch::async, [&] { return remove_on(session, receiver, snapshots); });
  bool all_of_source = remove_on(session, source, snapshots);
  on_receiver.get();
  return all_of_source;
}

namespace {
constexpr std::chrono::milliseconds kMoveSnapshotPoll{100};
}  // namespace

Expected<std::string> take_move_snapshot(Session& session, const MovePlan& move,
                                         const std::string& step, MoveSnapshot kind) {
  csi::v1::CreateSnapshotRequest request;
  request.set_source_volume_id(move.old_id);
  request.set_name(move_snapshot_prefix(move) + step);
  auto& parameters = *request.mutable_parameters();
  parameters[std::string(kSnapshotMessageParameter)] = fmt::format(
      "taken to move volume \"{}\" to node \"{}\"; removed once that is done", move.name, move.to);
  if (kind == MoveSnapshot::kPreCopy) parameters[std::string(kSnapshotPreCopyParameter)] = "true";
  csi::v1::CreateSnapshotResponse response;
  for (;;) {
    ROSETCTL_RETURN_IF_ERROR(session.client().controller(&csi::v1::Controller::Stub::CreateSnapshot,
                                                         request, &response,
                                                         CsiClient::kDataCallDeadline));
    if (response.snapshot().ready_to_use()) return response.snapshot().snapshot_id();
    std::this_thread::sleep_for(kMoveSnapshotPoll);
  }
}

Expected<MoveLeftovers> move_snapshots_left(Session& session, const MovePlan& move) {
  v1::ListSnapshotDetailsResponse response;
  ROSETCTL_RETURN_IF_ERROR(session.client().catalog(&v1::Catalog::Stub::ListSnapshotDetails,
                                                    v1::ListSnapshotDetailsRequest(), &response));
  MoveLeftovers left;
  for (const v1::SnapshotDetails& details : response.snapshots()) {
    if (!details.name().starts_with(move_snapshot_prefix(move))) continue;
    auto placed = decode_placed_id(details.id());
    if (placed && placed->node == move.from.node &&
        details.name().starts_with(move_snapshot_prefix(move) + "final")) {
      left.final_name = details.name();
    }
    auto id = encode_placed_id(move.from.node, placed ? placed->local_id : details.id());
    if (id && std::find(left.ids.begin(), left.ids.end(), *id) == left.ids.end())
      left.ids.push_back(*id);
  }
  return left;
}

Expected<PreCopyRound> pull_to_receiver(Session& session, const MovePlan& move,
                                        const std::string& snapshot, bool prepare) {
  auto placed = decode_placed_id(snapshot);
  if (!placed) return error(Code::kInternal, "snapshot id {} names no node", snapshot);
  v1::PullSnapshotRequest request;
  request.set_node_id(move.to);
  request.set_from_node_id(move.from.node);
  request.set_reference(placed->local_id);
  request.set_prepare_restore(prepare);
  auto done = pull_into(session, move.to, request);
  if (!done) return done.status();
  return PreCopyRound{snapshot, done->bytes_sent(), done->objects_sent()};
}

bool remove_move_snapshots(Session& session, const MovePlan& move,
                           const std::vector<std::string>& snapshots) {
  return remove_snapshot_copies(session, move.from.node, move.to, snapshots);
}

}  // namespace rosetctl::cli
