// Holding the node's attach lock through an open server-streaming call.
#include "cli/attach_turn.h"

#include <cstdio>

#include "cluster/peer_authority.h"
#include "daemon/grpc_status.h"
#include "daemon/node_state_service.h"

namespace rosetctl::cli {

Expected<AttachTurn> AttachTurn::take(v1::NodeState::Stub& stub,
                                      const v1::HoldAttachLockRequest& request,
                                      const std::string& proxy_node) {
  AttachTurn turn;
  turn.context_ = std::make_unique<grpc::ClientContext>();
  // No deadline: the call lasts as long as the verb's CSI calls, each with its own.
  if (!proxy_node.empty()) turn.context_->AddMetadata(kProxyNodeKey, proxy_node);
  turn.reader_ = stub.HoldAttachLock(turn.context_.get(), request);
  v1::HoldAttachLockResponse message;
  while (turn.reader_->Read(&message)) {
    if (message.held()) return turn;
    if (!message.waiting().empty()) {
      std::fprintf(stderr, "rosetctl: %s; waiting up to %lld s\n", message.waiting().c_str(),
                   static_cast<long long>(kAttachPatience.count()));
    }
  }
  Status ended = from_grpc(turn.reader_->Finish());
  turn.reader_.reset();  // finished: nothing for the destructor to end
  if (!ended.is_ok()) return ended;
  return error(Code::kInternal, "the node ended HoldAttachLock without taking the lock");
}

AttachTurn::~AttachTurn() {
  if (!reader_) return;
  context_->TryCancel();
  (void)reader_->Finish();
}

}  // namespace rosetctl::cli
