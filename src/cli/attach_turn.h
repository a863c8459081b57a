// A CLI run's turn at connecting or disconnecting a volume on a node: the node's attach lock
// (rosetctl.v1.NodeState's HoldAttachLock), held for as long as this object lives. Connect and
// disconnect are several CSI calls each; two runs on one volume and node take turns so their
// sequences never interleave ("am I the last user?" must stay true until acted on).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "core/status.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl::cli {

class AttachTurn {
 public:
  // Waits (as the node does, up to 60 s, saying so once on stderr) for the lock. `proxy_node`:
  // the node the controller forwards to (--on-node), or "" when `stub` reaches the node itself.
  static Expected<AttachTurn> take(v1::NodeState::Stub& stub,
                                   const v1::HoldAttachLockRequest& request,
                                   const std::string& proxy_node);

  AttachTurn(AttachTurn&&) = default;
  AttachTurn& operator=(AttachTurn&&) = default;
  // Ends the call, which releases the lock on the node.
  ~AttachTurn();

 private:
  AttachTurn() = default;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReader<v1::HoldAttachLockResponse>> reader_;
};

}  // namespace rosetctl::cli
