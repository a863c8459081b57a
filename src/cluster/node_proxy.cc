// NodeProxy: one reactor per call reads the request bytes, forwards them with a generic stub
// and writes the node's answer back: one answer for a unary call; for a server-streaming call
// (NodeState's HoldAttachLock) every message until the node ends the call, which ends when the
// caller does (its cancellation is passed on to the node).
#include "cluster/node_proxy.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "cluster/authorization.h"
#include "cluster/authorization_table.h"
#include "cluster/granted_reads.h"
#include "cluster/node_forward.h"
#include "cluster/peer_authority.h"
#include "core/validate.h"
#include "daemon/grpc_status.h"

namespace rosetctl {
namespace {

// Whether `method` ("/package.Service/Method") is one of our server-streaming RPCs; a method
// this binary has no descriptor for is taken for unary, as CSI's all are.
bool server_streaming(const std::string& method) {
  size_t slash = method.rfind('/');
  if (method.size() < 2 || method.front() != '/' || slash == 0 || slash == std::string::npos) {
    return false;
  }
  std::string name = method.substr(1, slash - 1) + "." + method.substr(slash + 1);
  const auto* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
  return descriptor != nullptr && descriptor->server_streaming() && !descriptor->client_streaming();
}

class ProxyReactor;

// The forwarded half of a server-streaming call: the node's messages go to the caller one at a
// time (the next read starts when the caller has taken the previous message).
class StreamForward final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit StreamForward(ProxyReactor& server) : server_(server) {}
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;
  grpc::ByteBuffer message;

 private:
  ProxyReactor& server_;
};

class ProxyReactor final : public grpc::ServerGenericBidiReactor {
 public:
  ProxyReactor(NodeProxy& proxy, grpc::GenericCallbackServerContext* call)
      : proxy_(proxy), call_(call), start_(std::chrono::steady_clock::now()) {
    // What the caller may do was decided before this call reached us (cluster/authorization.h).
    if (Status allowed = authorization_of(*call); !allowed) {
      finish(allowed);
      return;
    }
    const auto& metadata = call->client_metadata();
    auto named = metadata.find(kProxyNodeKey);
    if (named == metadata.end()) {
      finish(error(Code::kUnimplemented,
                   "{} is not served here: this server offers no such service (a controller has "
                   "no Node service); to reach a node's, name it (rosetctl --on-node NODE, gRPC "
                   "metadata \"{}\")",
                   call->method(), kProxyNodeKey));
      return;
    }
    node_.assign(named->second.data(), named->second.size());
    auto channel = proxy_.route(*call, call->method(), node_);
    if (!channel) {
      finish(channel.status());
      return;
    }
    channel_ = std::move(*channel);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      finish(error(Code::kInvalidArgument, "{}: no request message arrived", call_->method()));
      return;
    }
    Status body = decide_forwarded_bytes(answering_server(proxy_.context().options), *call_,
                                         call_->method(), node_, request_);
    if (!body) {
      finish(body);
      return;
    }
    forwarded_.set_deadline(call_->deadline());
    if (std::string grant = grant_for_node(); !grant.empty())
      forwarded_.AddMetadata(kTransferGrantKey, grant);
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
    if (server_streaming(call_->method())) {
      stream_ = std::make_unique<StreamForward>(*this);
      stub_->PrepareBidiStreamingCall(&forwarded_, call_->method(), grpc::StubOptions(),
                                      stream_.get());
      stream_->StartWriteLast(&request_, grpc::WriteOptions());
      stream_->StartRead(&stream_->message);
      stream_->StartCall();
      return;
    }
    stub_->UnaryCall(
        &forwarded_, call_->method(), grpc::StubOptions(), &request_, &response_,
        [this](grpc::Status status) {
          if (!status.ok()) {
            finish(from_grpc(status).with_context(fmt::format("node {}", display_quoted(node_))));
            return;
          }
          log(Status::ok());  // before: the reactor may be gone once finished
          StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
        });
  }

  // The caller went away or ended the call: so does the forwarded one (a node then releases
  // what the call held).
  void OnCancel() override { forwarded_.TryCancel(); }

  void OnWriteDone(bool ok) override {
    if (!stream_) return;  // the unary answer, written with Finish
    if (ok) {
      stream_->StartRead(&stream_->message);
    } else {
      forwarded_.TryCancel();
    }
  }

  // Called by StreamForward.
  void pass_on(const grpc::ByteBuffer& message) {
    outgoing_ = message;
    StartWrite(&outgoing_);
  }
  void stream_ended(const grpc::Status& status) {
    if (!status.ok()) {
      finish(from_grpc(status).with_context(fmt::format("node {}", display_quoted(node_))));
      return;
    }
    log(Status::ok());
    Finish(grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  void finish(const Status& status) {
    log(status);
    mark_answered(*call_);
    Finish(to_grpc(status));
  }

  // The transfer grant the node gets with the call (granted_reads.h): a new one when this is a
  // PullSnapshot the controller starts for its caller.
  std::string grant_for_node() {
    v1::PullSnapshotRequest pull;
    bool is_pull = call_->method() == "/rosetctl.v1.ObjectStore/PullSnapshot";
    if (is_pull) {
      grpc::ByteBuffer copy(request_);  // parsing consumes its buffer
      is_pull = parse_forwarded(&copy, &pull);
    }
    return grant_to_forward(proxy_.context(), *call_, call_->method(), node_,
                            is_pull ? &pull : nullptr);
  }

  void log(const Status& status) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
                    .count();
    Peer peer = peer_of(*call_);
    std::string by = peer.role == PeerRole::kLocal ? "" : " peer=" + peer.log_field();
    spdlog::info(
        "{} node={}{} forwarded duration={:.2f}ms status={}{}", escape_text(call_->method()),
        display_quoted(node_), by, ms, code_name(status.code()),
        status.is_ok() ? "" : fmt::format(" message=\"{}\"", escape_text(status.message())));
  }

  NodeProxy& proxy_;
  grpc::GenericCallbackServerContext* call_;
  std::chrono::steady_clock::time_point start_;
  std::string node_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  grpc::ClientContext forwarded_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::unique_ptr<StreamForward> stream_;  // a server-streaming call's forwarded half
  grpc::ByteBuffer outgoing_;              // the message being written to the caller
};

void StreamForward::OnReadDone(bool ok) {
  if (ok) server_.pass_on(message);  // else the node has ended the call: OnDone follows
}

void StreamForward::OnDone(const grpc::Status& status) {
  server_.stream_ended(status);
}

}  // namespace

grpc::ServerGenericBidiReactor* NodeProxy::CreateReactor(grpc::GenericCallbackServerContext* call) {
  return new ProxyReactor(*this, call);
}

Expected<std::shared_ptr<grpc::Channel>> NodeProxy::route(const grpc::ServerContextBase& call,
                                                          const std::string& method,
                                                          const std::string& node_id) {
  ROSETCTL_RETURN_IF_ERROR(authorization_of(call));  // cluster/authorization.h
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(node_id, "rosetctl-node"));
  // A node reading another node's store through us: only with our grant naming it the receiver.
  ROSETCTL_RETURN_IF_ERROR(check_proxied_read(context_, call, method, node_id));
  // This host's own commit store, read as any node's is (docs/guides/across-hosts.md,
  // "Moving snapshots between nodes"): the calls were authorized as for a node above.
  if (node_id == context_.options.node_id && own_objects_ && reads_a_commit_store(method)) {
    return own_objects_;
  }
  auto node = context_.store.find_node(node_id);
  if (!node) return node.status();
  if (!node->has_value()) {
    return error(Code::kUnavailable,
                 "node \"{}\" is not registered with this controller (rosetctl node list)",
                 node_id);
  }
  const std::string& address = (*node)->address;
  if (address.empty()) {
    return error(Code::kUnavailable,
                 "node \"{}\" registered no address: run its serve with --listen (and "
                 "--controller) so the controller can reach it",
                 node_id);
  }
  if (tls_.certificate.empty()) {
    return error(Code::kUnavailable,
                 "this controller has no TLS certificate to reach node \"{}\" with: start it with "
                 "--listen and --tls-cert, --tls-key, --tls-ca",
                 node_id);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // By node and address: the channel checks that the node answering is `node_id` (tls_files.h).
  auto& channel = channels_[node_id + "@" + address];
  if (!channel) channel = kept_channel(address, peer_channel_credentials(tls_, "node", node_id));
  return channel;
}

}  // namespace rosetctl
