// Calls naming another node that reach a service this server offers itself. `serve --role all`
// (and `--role node`) registers Node, NodeState and ObjectStore, so a call carrying
// `rosetctl-node: B` (rosetctl --on-node B, a node pulling a snapshot of B through this host)
// is not the generic proxy's (node_proxy.h) but lands in our own handlers. Answering it from
// this host's state would be wrong data or a misleading NOT_FOUND; so the services' entry
// points (node_routes.h in front of daemon/'s Node and NodeState, the ObjectStore's own) hand
// it here, and it is forwarded to B exactly as a controller's proxy forwards it.
// A call naming no node, or this node (kubelet's, the local CLI's), is answered in place with
// no extra hop: the only cost is one metadata lookup.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_callback.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/cluster_context.h"
#include "daemon/call_log.h"
#include "daemon/grpc_status.h"
#include "daemon/handler_pool.h"

namespace rosetctl {

// The node `call` names in kProxyNodeKey (cluster/peer_authority.h) when it is not this one.
std::optional<std::string> other_node_named(const ServiceContext& context,
                                            const grpc::ServerContextBase& call);

// Forwards the unary call `method` (its full name, "/csi.v1.Node/NodeGetVolumeStats") to
// `node` and finishes `call` with the node's answer.
grpc::ServerUnaryReactor* forward_unary(ClusterContext& context, grpc::CallbackServerContext* call,
                                        std::string method, std::string node,
                                        const google::protobuf::Message& request,
                                        google::protobuf::Message* response);

// `here()` (this server's own answer of the call) unless the call names another node: then
// the unary call `method` of `service` ("csi.v1.Node") goes to that node.
template <typename Here>
grpc::ServerUnaryReactor* forward_or(ClusterContext& context, grpc::CallbackServerContext* call,
                                     std::string_view service, std::string_view method,
                                     const google::protobuf::Message& request,
                                     google::protobuf::Message* response, Here here) {
  if (auto node = other_node_named(context, *call)) {
    return forward_unary(context, call, fmt::format("/{}/{}", service, method), std::move(*node),
                         request, response);
  }
  return here();
}

// answer() (daemon/call_log.h; answer_now() when `pool` is null) of `method` of this server's
// own `service`, unless the call names another node: then it goes to that node.
template <typename Handler>
grpc::ServerUnaryReactor* answer_or_forward(ClusterContext& context, HandlerPool* pool,
                                            grpc::CallbackServerContext* call,
                                            std::string_view service, std::string_view method,
                                            const google::protobuf::Message* request,
                                            google::protobuf::Message* response, Handler handler) {
  return forward_or(context, call, service, method, *request, response, [&] {
    if (pool == nullptr) return answer_now(call, method, request, response, std::move(handler));
    return answer(*pool, call, method, request, response, std::move(handler));
  });
}

// What the forwarding of one call shares between its unary and streaming forms: the route to
// the node, the forwarded call's context and the log line.
class NodeHop {
 public:
  NodeHop(ClusterContext& context, grpc::CallbackServerContext* call, std::string method,
          std::string node);
  // The channel to the node, or why there is none (authorization included).
  Expected<std::shared_ptr<grpc::Channel>> route();
  // The status to finish the caller's call with; logs it.
  grpc::Status finish(const Status& status);
  // What the node answered, its failure naming it (as the proxy's do).
  Status from_node(const grpc::Status& status) const;
  // Starts the forwarded unary call; `done` gets the node's status, `answer` its answer.
  void start_unary(const std::shared_ptr<grpc::Channel>& channel,
                   const google::protobuf::Message& request, grpc::ByteBuffer* answer,
                   std::function<void(grpc::Status)> done);
  // Starts the forwarded server-streaming call; `reactor` reads the node's messages, the first
  // into `first`.
  void start_stream(const std::shared_ptr<grpc::Channel>& channel,
                    const google::protobuf::Message& request,
                    grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* reactor,
                    grpc::ByteBuffer* first);
  void cancel() { forwarded_.TryCancel(); }
  const std::string& node() const { return node_; }

 private:
  // The transfer grant the node gets with the call (granted_reads.h grant_to_forward).
  void pass_grant(const google::protobuf::Message& request);

  ClusterContext& context_;
  grpc::CallbackServerContext* call_;
  std::string method_;
  std::string node_;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<grpc::GenericStub> stub_;
  grpc::ClientContext forwarded_;
  grpc::ByteBuffer request_;
};

// `message` from a forwarded call's bytes (consumed); false when they are not one.
bool parse_forwarded(grpc::ByteBuffer* bytes, google::protobuf::Message* message);

// A server-streaming call forwarded to a node: each of the node's messages is passed on when
// the caller has taken the previous one; the node's status ends the call, and the caller's
// cancellation is passed on to the node.
template <typename Response>
class ForwardedStream final : public grpc::ServerWriteReactor<Response> {
 public:
  ForwardedStream(ClusterContext& context, grpc::CallbackServerContext* call, std::string method,
                  std::string node, const google::protobuf::Message& request)
      : hop_(context, call, std::move(method), std::move(node)), reader_(*this) {
    auto channel = hop_.route();
    if (!channel) {
      this->Finish(hop_.finish(channel.status()));
      return;
    }
    hop_.start_stream(*channel, request, &reader_, &reader_.bytes);
  }

  void OnWriteDone(bool ok) override {
    if (ok) {
      reader_.StartRead(&reader_.bytes);
    } else {
      hop_.cancel();  // the caller went away: the node's call ends, then OnDone finishes
    }
  }
  void OnCancel() override { hop_.cancel(); }
  void OnDone() override { delete this; }

 private:
  class Reader final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Reader(ForwardedStream& stream) : stream_(stream) {}
    void OnReadDone(bool ok) override {
      if (ok) stream_.pass_on();  // else the node ended the call: OnDone follows
    }
    void OnDone(const grpc::Status& status) override { stream_.ended(status); }
    grpc::ByteBuffer bytes;

   private:
    ForwardedStream& stream_;
  };

  void pass_on() {
    message_.Clear();
    if (!parse_forwarded(&reader_.bytes, &message_)) {
      failed_ =
          error(Code::kInternal, "node \"{}\" sent a message that does not parse", hop_.node());
      hop_.cancel();
      return;
    }
    this->StartWrite(&message_);
  }
  void ended(const grpc::Status& status) {
    this->Finish(hop_.finish(failed_.is_ok() ? hop_.from_node(status) : failed_));
  }

  NodeHop hop_;
  Reader reader_;
  Response message_;  // the message being written to the caller
  Status failed_;     // set before the forwarded call is cancelled for a bad message
};

}  // namespace rosetctl
