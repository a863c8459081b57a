// node_forward.h: the route, the forwarded call and its log line, and the unary form.
#include "cluster/node_forward.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <spdlog/spdlog.h>

#include <functional>

#include "cluster/granted_reads.h"
#include "cluster/peer_authority.h"
#include "core/validate.h"
#include "daemon/grpc_status.h"

namespace rosetctl {
namespace {

// gRPC's own protobuf (de)serialization, as its generated stubs use it.
using ProtoTraits = grpc::SerializationTraits<google::protobuf::Message>;

grpc::ByteBuffer forwarded_bytes(const google::protobuf::Message& message) {
  grpc::ByteBuffer bytes;
  bool own_buffer = false;
  (void)ProtoTraits::Serialize(message, &bytes, &own_buffer);
  return bytes;
}

// A unary call forwarded to a node; its answer is parsed into the typed response gRPC sends.
class ForwardedUnary final : public grpc::ServerUnaryReactor {
 public:
  ForwardedUnary(ClusterContext& context, grpc::CallbackServerContext* call, std::string method,
                 std::string node, const google::protobuf::Message& request,
                 google::protobuf::Message* response)
      : hop_(context, call, std::move(method), std::move(node)), response_(response) {
    auto channel = hop_.route();
    if (!channel) {
      Finish(hop_.finish(channel.status()));
      return;
    }
    hop_.start_unary(*channel, request, &answer_,
                     [this](const grpc::Status& status) { answered(hop_.from_node(status)); });
  }

  void OnCancel() override { hop_.cancel(); }
  void OnDone() override { delete this; }

 private:
  void answered(Status status) {
    if (status.is_ok() && !parse_forwarded(&answer_, response_)) {
      status =
          error(Code::kInternal, "node \"{}\" sent an answer that does not parse", hop_.node());
    }
    if (!status.is_ok()) response_->Clear();
    Finish(hop_.finish(status));  // the last use of this reactor
  }

  NodeHop hop_;
  google::protobuf::Message* response_;
  grpc::ByteBuffer answer_;
};

}  // namespace

std::optional<std::string> other_node_named(const ServiceContext& context,
                                            const grpc::ServerContextBase& call) {
  const auto& metadata = call.client_metadata();
  auto named = metadata.find(kProxyNodeKey);
  if (named == metadata.end()) return std::nullopt;
  std::string node(named->second.data(), named->second.size());
  if (node == context.options.node_id) return std::nullopt;
  return node;
}

bool parse_forwarded(grpc::ByteBuffer* bytes, google::protobuf::Message* message) {
  return ProtoTraits::Deserialize(bytes, message).ok();
}

NodeHop::NodeHop(ClusterContext& context, grpc::CallbackServerContext* call, std::string method,
                 std::string node)
    : context_(context),
      call_(call),
      method_(std::move(method)),
      node_(std::move(node)),
      start_(std::chrono::steady_clock::now()) {}

Expected<std::shared_ptr<grpc::Channel>> NodeHop::route() {
  if (context_.options.role == PluginRole::kNode) {
    return error(Code::kFailedPrecondition,
                 "{} names node {} (gRPC metadata \"{}\"), but this is node {} (serve --role "
                 "node), which forwards no calls: reach other nodes through the controller "
                 "(rosetctl --controller ADDRESS --on-node NODE)",
                 method_, display_quoted(node_), kProxyNodeKey,
                 display_quoted(context_.options.node_id));
  }
  if (!context_.route_to_node) {
    return error(Code::kUnavailable, "this server forwards no calls: it has no proxy to node {}",
                 display_quoted(node_));
  }
  return context_.route_to_node(*call_, method_, node_);
}

Status NodeHop::from_node(const grpc::Status& status) const {
  if (status.ok()) return Status::ok();
  return from_grpc(status).with_context(fmt::format("node {}", display_quoted(node_)));
}

grpc::Status NodeHop::finish(const Status& status) {
  if (!status.is_ok()) mark_answered(*call_);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  Peer peer = peer_of(*call_);
  std::string by = peer.role == PeerRole::kLocal ? "" : " peer=" + peer.log_field();
  spdlog::info("{} node={}{} forwarded duration={:.2f}ms status={}{}", escape_text(method_),
               display_quoted(node_), by, ms, code_name(status.code()),
               status.is_ok() ? "" : fmt::format(" message=\"{}\"", escape_text(status.message())));
  return to_grpc(status);
}

void NodeHop::pass_grant(const google::protobuf::Message& request) {
  const auto* pull = dynamic_cast<const v1::PullSnapshotRequest*>(&request);
  std::string grant = grant_to_forward(context_, *call_, method_, node_, pull);
  if (!grant.empty()) forwarded_.AddMetadata(kTransferGrantKey, grant);
}

void NodeHop::start_unary(const std::shared_ptr<grpc::Channel>& channel,
                          const google::protobuf::Message& request, grpc::ByteBuffer* answer,
                          std::function<void(grpc::Status)> done) {
  request_ = forwarded_bytes(request);
  stub_ = std::make_unique<grpc::GenericStub>(channel);
  forwarded_.set_deadline(call_->deadline());
  pass_grant(request);
  stub_->UnaryCall(&forwarded_, method_, grpc::StubOptions(), &request_, answer, std::move(done));
}

void NodeHop::start_stream(const std::shared_ptr<grpc::Channel>& channel,
                           const google::protobuf::Message& request,
                           grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* reactor,
                           grpc::ByteBuffer* first) {
  request_ = forwarded_bytes(request);
  stub_ = std::make_unique<grpc::GenericStub>(channel);
  forwarded_.set_deadline(call_->deadline());
  pass_grant(request);
  stub_->PrepareBidiStreamingCall(&forwarded_, method_, grpc::StubOptions(), reactor);
  reactor->StartWriteLast(&request_, grpc::WriteOptions());
  reactor->StartRead(first);
  reactor->StartCall();
}

grpc::ServerUnaryReactor* forward_unary(ClusterContext& context, grpc::CallbackServerContext* call,
                                        std::string method, std::string node,
                                        const google::protobuf::Message& request,
                                        google::protobuf::Message* response) {
  return new ForwardedUnary(context, call, std::move(method), std::move(node), request, response);
}

}  // namespace rosetctl
