// The controller's replica loop (`volume replicate`): for each volume whose replica is due (the
// controller's store, volume_replicas; schedule in replica_schedule.h), a round on the serve's
// in-process channel, through the very services `snapshot create` and `snapshot push` call:
//
//   CreateSnapshot of the volume (on its node A, where the routing controller sends it), until
//   ready; ObjectStore PullSnapshot of it on the replica's node B through the controller's
//   proxy (a transfer grant per pull; B fetches only the objects it lacks); then the round is
//   recorded, and only then the previous round's snapshot is deleted on B and on A.
//
// So B always holds at least one whole replica, and `volume create NEW --from-snapshot SNAP
// --node B` restores it with A gone. A failed round is logged and recorded (volume show) and the
// replica is tried again one interval after that round's start; its snapshot on A is removed.
// One thread, one round at a time; the destructor stops it (a round in progress is cancelled
// at its next call).
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/state_store.h"

namespace rosetctl {

class ReplicaLoop {
 public:
  // Looks for due replicas every `poll`; a call of a round is cut off after `deadline`.
  ReplicaLoop(StateStore& store, std::shared_ptr<grpc::Channel> channel,
              std::chrono::milliseconds poll = std::chrono::seconds(1));
  ~ReplicaLoop();
  ReplicaLoop(const ReplicaLoop&) = delete;
  ReplicaLoop& operator=(const ReplicaLoop&) = delete;

 private:
  void run();
  void round(const VolumeReplicaRecord& replica);
  // Whether the loop is stopping (then a round gives up where it is).
  bool stopping();
  // The call a round waits on (nullptr: none), cancelled when the loop stops. False when the
  // loop is stopping already (the call is not to be made).
  bool track(grpc::ClientContext* call);

  StateStore& store_;
  std::shared_ptr<grpc::Channel> channel_;
  std::chrono::milliseconds poll_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  grpc::ClientContext* in_flight_ = nullptr;  // guarded by mutex_
  std::thread thread_;                        // last: started once everything above is set
};

}  // namespace rosetctl
