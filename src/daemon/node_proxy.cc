// NodeProxy: one reactor per call reads the request bytes, forwards them with a generic stub
// and writes the node's answer back.
#include "daemon/node_proxy.h"

#include <grpcpp/generic/generic_stub.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/validate.h"
#include "daemon/grpc_status.h"
#include "daemon/peer_authority.h"

namespace rosetctl {
namespace {

class ProxyReactor final : public grpc::ServerGenericBidiReactor {
 public:
  ProxyReactor(NodeProxy& proxy, grpc::GenericCallbackServerContext* call)
      : proxy_(proxy), call_(call), start_(std::chrono::steady_clock::now()) {
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
    forwarded_.set_deadline(call_->deadline());
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
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

  void OnDone() override { delete this; }

 private:
  void finish(const Status& status) {
    log(status);
    mark_answered(*call_);
    Finish(to_grpc(status));
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
};

}  // namespace

grpc::ServerGenericBidiReactor* NodeProxy::CreateReactor(grpc::GenericCallbackServerContext* call) {
  return new ProxyReactor(*this, call);
}

Expected<std::shared_ptr<grpc::Channel>> NodeProxy::route(const grpc::ServerContextBase& call,
                                                          const std::string& method,
                                                          const std::string& node_id) {
  ROSETCTL_RETURN_IF_ERROR(authorize_forward(peer_of(call), method, node_id));
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(node_id, "rosetctl-node"));
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
  auto& channel = channels_[address];
  if (!channel) channel = grpc::CreateChannel(address, channel_credentials(tls_));
  return channel;
}

}  // namespace rosetctl
