// cli/move_snapshots.h. Each DeleteSnapshot reclaims its node's store there and then (a
// collection that finds the store busy is skipped, left to the next one): a node's removals go
// one after another, and the two nodes', which share nothing, side by side. After a move's
// switch the user waits for this, and reclaiming a volume's worth of objects takes a while.
#include "cli/move_snapshots.h"

#include <cstdio>
#include <future>

#include "cluster/placed_id.h"
#include "csi.grpc.pb.h"

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

}  // namespace rosetctl::cli
