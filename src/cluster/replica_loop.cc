// The replica loop (replica_loop.h): its thread, and one round of one volume.
#include "cluster/replica_loop.h"

#include <spdlog/spdlog.h>

#include <functional>
#include <optional>

#include "cluster/peer_authority.h"
#include "cluster/placed_id.h"
#include "cluster/replica_schedule.h"
#include "core/clock.h"
#include "core/commit_store/sha256.h"
#include "core/validate.h"
#include "csi.grpc.pb.h"
#include "daemon/grpc_status.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {
namespace {

constexpr auto kReplicaCallDeadline = std::chrono::hours(6);
constexpr auto kReplicaSnapshotPoll = std::chrono::milliseconds(100);

// The calls of a round, each on the serve's in-process channel (a local caller: the proxy
// issues the pull's transfer grant as for an admin's `snapshot push`).
struct ReplicaCalls {
  std::unique_ptr<csi::v1::Controller::Stub> controller;
  std::unique_ptr<v1::ObjectStore::Stub> objects;
  std::function<bool(grpc::ClientContext*)> track;  // ReplicaLoop::track

  // A call's deadline, and its registration for cancelling (an RAII pair with untrack()).
  Status limit(grpc::ClientContext& call) {
    call.set_deadline(std::chrono::system_clock::now() + kReplicaCallDeadline);
    if (!track(&call)) return error(Code::kCancelled, "the controller is stopping");
    return Status::ok();
  }
  struct Untrack {
    ReplicaCalls& calls;
    ~Untrack() { calls.track(nullptr); }
  };

  // A ready snapshot of the volume; its placed id on the volume's node.
  template <typename Stopping>
  Expected<std::string> snapshot(const VolumeReplicaRecord& replica, const std::string& name,
                                 Stopping stopping) {
    csi::v1::CreateSnapshotRequest request;
    request.set_source_volume_id(replica.volume_id);
    request.set_name(name);
    (*request.mutable_parameters())["message"] =
        fmt::format("replica of volume {} on node \"{}\"; replaced by the next round",
                    replica.volume_id, replica.to_node);
    for (;;) {
      grpc::ClientContext call;
      ROSETCTL_RETURN_IF_ERROR(limit(call));
      Untrack untrack{*this};
      csi::v1::CreateSnapshotResponse response;
      ROSETCTL_RETURN_IF_ERROR(from_grpc(controller->CreateSnapshot(&call, request, &response)));
      if (response.snapshot().ready_to_use()) return response.snapshot().snapshot_id();
      if (stopping()) return error(Code::kCancelled, "the controller is stopping");
      std::this_thread::sleep_for(kReplicaSnapshotPoll);
    }
  }

  // PullSnapshot on the replica's node: its final counts.
  Expected<v1::PullSnapshotProgress> pull(const PlacedId& snapshot, const std::string& to_node) {
    v1::PullSnapshotRequest request;
    request.set_node_id(to_node);
    request.set_from_node_id(snapshot.node);
    request.set_reference(snapshot.local_id);
    grpc::ClientContext call;
    ROSETCTL_RETURN_IF_ERROR(limit(call));
    Untrack untrack{*this};
    call.AddMetadata(kProxyNodeKey, to_node);
    auto reader = objects->PullSnapshot(&call, request);
    v1::PullSnapshotProgress message;
    v1::PullSnapshotProgress last;
    while (reader->Read(&message))
      last = message;
    ROSETCTL_RETURN_IF_ERROR(from_grpc(reader->Finish()));
    if (!last.done()) {
      return error(Code::kUnavailable, "node \"{}\" ended the pull without its result", to_node);
    }
    return last;
  }

  // DeleteSnapshot of `local_id` on `node`; a failure is logged: the next round's is the one
  // that counts, and a leftover is the operator's to delete (snapshot list shows it).
  void forget(const std::string& node, const std::string& local_id) {
    auto id = encode_placed_id(node, local_id);
    if (!id) return;
    grpc::ClientContext call;
    if (!limit(call)) return;
    Untrack untrack{*this};
    csi::v1::DeleteSnapshotRequest request;
    request.set_snapshot_id(*id);
    csi::v1::DeleteSnapshotResponse response;
    Status removed = from_grpc(controller->DeleteSnapshot(&call, request, &response));
    if (!removed) {
      spdlog::warn("replica: the snapshot {} stays on node {}: {}", *id, display_quoted(node),
                   escape_text(removed.message()));
    }
  }
};

}  // namespace

ReplicaLoop::ReplicaLoop(StateStore& store, std::shared_ptr<grpc::Channel> channel,
                         std::chrono::milliseconds poll)
    : store_(store), channel_(std::move(channel)), poll_(poll), thread_([this] { run(); }) {}

ReplicaLoop::~ReplicaLoop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();
  }
  wake_.notify_all();
  thread_.join();
}

bool ReplicaLoop::stopping() {
  std::lock_guard lock(mutex_);
  return stop_;
}

bool ReplicaLoop::track(grpc::ClientContext* call) {
  std::lock_guard lock(mutex_);
  if (call != nullptr && stop_) return false;
  in_flight_ = call;
  return true;
}

void ReplicaLoop::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, poll_, [this] { return stop_; })) return;
    }
    auto replicas = store_.list_volume_replicas();
    if (!replicas) {
      spdlog::warn("replica: cannot read the replicas: {}",
                   escape_text(replicas.status().message()));
      continue;
    }
    for (const std::string& id : replica::due_replicas(*replicas, unix_now_seconds())) {
      if (stopping()) return;
      for (const VolumeReplicaRecord& replica : *replicas)
        if (replica.volume_id == id) round(replica);
    }
  }
}

void ReplicaLoop::round(const VolumeReplicaRecord& replica) {
  int64_t started = unix_now_seconds();
  // Claimed first: a `--now` during the round makes it due again after it.
  Status claimed = store_.set_volume_replica_due(
      replica.volume_id, replica::next_due_after(started, replica.every_seconds));
  if (!claimed) return;  // removed meanwhile (--off)
  ReplicaCalls calls{csi::v1::Controller::NewStub(channel_), v1::ObjectStore::NewStub(channel_),
                     [this](grpc::ClientContext* call) { return track(call); }};
  VolumeReplicaRecord done = replica;
  // A name of its own per round: CreateSnapshot of a name taken answers that (older) snapshot.
  std::string tag = sha256_hex(replica.volume_id + "\n" + replica.to_node).substr(0, 16);
  std::string name = fmt::format("replica-{}-{}", tag, unix_now_ns());
  std::optional<PlacedId> taken;
  auto failed = [&](const Status& status) {
    if (stopping()) {
      // Cut off by the controller stopping: no failure of the replica's, the next start retries.
      spdlog::info("replica: volume {}: the round stops with the controller",
                   display_quoted(replica.volume_id));
      return;
    }
    if (taken) calls.forget(taken->node, taken->local_id);
    done.last_error = status.message();
    done.last_error_unix = unix_now_seconds();
    spdlog::warn("replica: volume {} to node {}: {}", display_quoted(replica.volume_id),
                 display_quoted(replica.to_node), escape_text(status.message()));
    Status recorded = store_.record_volume_replica_round(done);
    if (!recorded && recorded.code() != Code::kNotFound) {
      spdlog::warn("replica: cannot record the round: {}", escape_text(recorded.message()));
    }
  };
  auto snapshot = calls.snapshot(replica, name, [this] { return stopping(); });
  if (!snapshot && snapshot.status().code() == Code::kNotFound) {
    // The volume is gone (deleted, or its node's state with it): nothing more to replicate.
    // Its last replica stays on the target, which is what it was kept for.
    if (store_.remove_volume_replica(replica.volume_id)) {
      spdlog::info(
          "replica: volume {} is gone ({}): its replica setting is removed; its last "
          "replica {} stays on node {}",
          display_quoted(replica.volume_id), escape_text(snapshot.status().message()),
          replica.snapshot_id.empty() ? std::string("(none)") : replica.snapshot_id,
          display_quoted(replica.to_node));
      return;
    }
  }
  if (!snapshot) return failed(snapshot.status().with_context("taking the snapshot"));
  taken = decode_placed_id(*snapshot);
  if (!taken) {
    return failed(error(Code::kFailedPrecondition,
                        "the snapshot {} is on the controller host: only volumes placed on a "
                        "node have replicas",
                        *snapshot));
  }
  auto pulled = calls.pull(*taken, replica.to_node);
  if (!pulled) {
    return failed(pulled.status().with_context(
        fmt::format("node \"{}\" pulling the snapshot", replica.to_node)));
  }
  auto on_replica = encode_placed_id(replica.to_node, taken->local_id);
  if (!on_replica) return failed(on_replica.status());
  done.snapshot_id = *on_replica;
  done.source_snapshot_id = *snapshot;
  done.last_success_unix = unix_now_seconds();
  done.last_bytes_sent = pulled->bytes_sent();
  done.rounds = replica.rounds + 1;
  Status recorded = store_.record_volume_replica_round(done);
  if (!recorded) {
    // Set off or to another node during the round: this round's snapshots are nobody's.
    calls.forget(replica.to_node, taken->local_id);
    calls.forget(taken->node, taken->local_id);
    return;
  }
  spdlog::info("replica: volume {} is on node {} as {} ({} bytes sent)",
               display_quoted(replica.volume_id), display_quoted(replica.to_node), *on_replica,
               pulled->bytes_sent());
  // The new replica is whole on B and recorded: the previous one can go, from both nodes.
  if (auto previous = decode_placed_id(replica.source_snapshot_id);
      previous && previous->local_id != taken->local_id) {
    calls.forget(replica.to_node, previous->local_id);
    calls.forget(previous->node, previous->local_id);
  }
}

}  // namespace rosetctl
