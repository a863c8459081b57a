// rosetctl.v1.ObjectStore: this node's commit store, read by other nodes (LookupSnapshot,
// FetchObjects) and filled from another node on request (PullSnapshot, whose
// receiving half is snapshot_pull.h). Served on every serve, beside whatever else it serves.
#pragma once

#include "cluster/cluster_context.h"
#include "daemon/handler_pool.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

// The largest piece of an object in one message: well under gRPC's 4 MiB message limit (which
// the controller's proxy and older receivers keep), and big enough that a message's overhead is
// small against its bytes.
inline constexpr int64_t kObjectChunkBytes = 1 << 20;
// The largest message a receiver takes from a source it dials directly (source_node.h): a chunk
// and its framing, set on that channel rather than left to gRPC's default.
inline constexpr int kMaxObjectMessageBytes = 4 << 20;

class ObjectStoreService final : public v1::ObjectStore::CallbackService {
 public:
  ObjectStoreService(ClusterContext& context, HandlerPool& handlers)
      : context_(context), handlers_(handlers) {}

  using Request = grpc::CallbackServerContext;
  grpc::ServerUnaryReactor* LookupSnapshot(Request*, const v1::LookupSnapshotRequest*,
                                           v1::LookupSnapshotResponse*) override;
  grpc::ServerWriteReactor<v1::ObjectChunk>* FetchObjects(Request*,
                                                          const v1::FetchObjectsRequest*) override;
  grpc::ServerWriteReactor<v1::PullSnapshotProgress>* PullSnapshot(
      Request*, const v1::PullSnapshotRequest*) override;

 private:
  ClusterContext& context_;
  HandlerPool& handlers_;
};

}  // namespace rosetctl
