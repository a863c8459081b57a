// Reaching the node a snapshot is pulled from: directly, or through the controller's proxy.
#include "cluster/source_node.h"

#include <grpc/grpc_security_constants.h>
#include <spdlog/spdlog.h>

#include "cluster/object_store_service.h"
#include "cluster/peer_authority.h"
#include "core/call_scope.h"
#include "core/validate.h"
#include "daemon/grpc_status.h"

namespace rosetctl {
namespace {

constexpr auto kLookupDeadline = std::chrono::seconds(60);
// A direct route that does not answer this soon is given up for the proxy (a firewall that
// drops the packets would otherwise hold the pull for gRPC's 20-second connect timeout).
constexpr auto kDirectLookupDeadline = std::chrono::seconds(10);
constexpr auto kRegistryDeadline = std::chrono::seconds(30);
constexpr auto kFetchDeadline = std::chrono::hours(24);

// The address the controller's registry records for `node`; "" when it records none.
Expected<std::string> registered_address(const std::shared_ptr<grpc::Channel>& controller,
                                         const std::string& node) {
  // ListNodes rather than GetNode: a node's certificate may read the whole registry, but may
  // ask for no other node by name (peer_authority.h).
  auto registry = v1::Registry::NewStub(controller);
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + kRegistryDeadline);
  v1::ListNodesResponse nodes;
  grpc::Status status = registry->ListNodes(&call, v1::ListNodesRequest(), &nodes);
  if (!status.ok()) {
    return from_grpc(status).with_context("asking the controller's registry for node addresses");
  }
  for (const v1::Node& registered : nodes.nodes()) {
    if (registered.node_id() == node) return registered.address();
  }
  return std::string();
}

// On the controller itself (no controller to ask): the address its own registry records for
// `node`; NOT_FOUND naming a node it does not know.
Expected<std::string> own_registry_address(const ServiceContext& context, const std::string& node) {
  auto registered = context.store.find_node(node);
  if (!registered) return registered.status();
  if (!registered->has_value()) {
    return error(Code::kNotFound,
                 "node {} is not registered with this controller (rosetctl node list)",
                 display_quoted(node));
  }
  return (*registered)->address;
}

// One connection of its own per lane, so the lanes' bytes are decrypted side by side and no
// lane's flow control holds up another's.
std::shared_ptr<grpc::Channel> lane_channel(const std::string& address,
                                            const std::shared_ptr<grpc::ChannelCredentials>& tls) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxObjectMessageBytes);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, tls, args);
}

}  // namespace

SourceNode SourceNode::through_proxy(const ServiceContext& context, const std::string& node,
                                     int lanes) {
  std::vector<std::unique_ptr<v1::ObjectStore::Stub>> stubs;
  for (int lane = 0; lane < std::max(lanes, 1); ++lane)
    stubs.push_back(v1::ObjectStore::NewStub(context.options.controller_channel));
  return SourceNode(node, "", std::move(stubs));
}

Expected<SourceNode> SourceNode::dial(const ServiceContext& context, const std::string& node,
                                      int lanes) {
  if (!context.options.node_credentials) {
    return error(Code::kUnavailable, "this host has no certificate to show another node");
  }
  auto address = context.options.controller_channel
                     ? registered_address(context.options.controller_channel, node)
                     : own_registry_address(context, node);
  if (!address) return address.status();
  if (address->empty()) {
    return error(Code::kUnavailable, "the registry records no address for node {}",
                 display_quoted(node));
  }
  std::vector<std::unique_ptr<v1::ObjectStore::Stub>> stubs;
  for (int lane = 0; lane < std::max(lanes, 1); ++lane) {
    stubs.push_back(
        v1::ObjectStore::NewStub(lane_channel(*address, context.options.node_credentials)));
  }
  return SourceNode(node, std::move(*address), std::move(stubs));
}

Expected<SourceNode> SourceNode::reach(const ServiceContext& context, const std::string& node,
                                       const std::string& reference, int lanes,
                                       v1::LookupSnapshotResponse* found) {
  auto direct = dial(context, node, lanes);
  if (direct) {
    bool answered = false;
    auto looked_up = direct->lookup(reference, &answered);
    if (looked_up || answered) {
      if (!looked_up) return looked_up.status();
      *found = std::move(*looked_up);
      return direct;
    }
    direct = looked_up.status();
  }
  // This host is the controller: its proxy would dial the same address with the same
  // certificate, so the direct route's failure is the answer.
  if (!context.options.controller_channel) return direct.status();
  spdlog::info("pulling from node {} through the controller's proxy: {}", display_quoted(node),
               escape_text(direct.status().message()));
  SourceNode proxied = through_proxy(context, node, lanes);
  bool answered = false;
  auto looked_up = proxied.lookup(reference, &answered);
  if (!looked_up) return looked_up.status();
  *found = std::move(*looked_up);
  return proxied;
}

std::string SourceNode::route() const {
  return direct() ? fmt::format("directly at {}", address_) : "through the controller's proxy";
}

Expected<v1::LookupSnapshotResponse> SourceNode::lookup(const std::string& reference,
                                                        bool* answered) {
  grpc::ClientContext call;
  prepare(call, direct() ? kDirectLookupDeadline : kLookupDeadline);
  v1::LookupSnapshotRequest request;
  request.set_reference(reference);
  v1::LookupSnapshotResponse response;
  grpc::Status status = stubs_.front()->LookupSnapshot(&call, request, &response);
  *answered = false;
  // Whatever came back is believed only from the node meant.
  if (status.ok() || was_answered(call)) ROSETCTL_RETURN_IF_ERROR(check_identity(call));
  *answered = status.ok() || was_answered(call);
  if (!status.ok()) return failed(status);
  return response;
}

Status SourceNode::fetch(int lane, const std::vector<v1::ObjectRef>& wants,
                         const std::function<Status(const v1::ObjectChunk&)>& take) {
  v1::FetchObjectsRequest request;
  for (const v1::ObjectRef& want : wants)
    *request.add_objects() = want;
  grpc::ClientContext call;
  prepare(call, kFetchDeadline);
  std::unique_ptr<grpc::ClientReader<v1::ObjectChunk>> reader =
      stubs_.at(static_cast<std::size_t>(lane))->FetchObjects(&call, request);
  v1::ObjectChunk chunk;
  Status stopped;
  bool first = true;
  while (reader->Read(&chunk)) {
    if (first) stopped = check_identity(call);
    first = false;
    if (stopped) stopped = check_current_call();  // the caller of the pull went away: so does this
    if (stopped) stopped = take(chunk);
    if (!stopped) {
      call.TryCancel();
      while (reader->Read(&chunk)) {
      }
      break;
    }
  }
  grpc::Status finished = reader->Finish();
  if (!stopped) return stopped;
  if (!finished.ok()) return failed(finished);
  return Status::ok();
}

void SourceNode::prepare(grpc::ClientContext& call,
                         std::chrono::system_clock::duration deadline) const {
  if (!direct()) call.AddMetadata(kProxyNodeKey, node_);
  if (!grant_.empty()) call.AddMetadata(kTransferGrantKey, grant_);
  call.set_deadline(std::chrono::system_clock::now() + deadline);
}

Status SourceNode::check_identity(const grpc::ClientContext& call) const {
  if (!direct()) return Status::ok();
  std::shared_ptr<const grpc::AuthContext> auth = call.auth_context();
  std::string pem;
  if (auth != nullptr) {
    auto values = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
    if (!values.empty()) pem.assign(values.front().data(), values.front().size());
  }
  Peer peer = peer_from_certificate(pem);
  if (peer.role == PeerRole::kNode && peer.name == node_) return Status::ok();
  return error(Code::kPermissionDenied, "{} answered at {}, where node {} was expected",
               pem.empty() ? "a server without a certificate" : peer.describe(), address_,
               display_quoted(node_));
}

Status SourceNode::failed(const grpc::Status& status) const {
  Status failure = from_grpc(status);
  // A source that vanished mid-stream may surface as a reset stream rather than UNAVAILABLE;
  // either way it is gone for now, and a retry resumes.
  if (failure.code() == Code::kInternal || failure.code() == Code::kUnknown) {
    failure = Status(Code::kUnavailable, failure.message());
  }
  return failure.with_context(fmt::format("pulling from node \"{}\"", node_));
}

}  // namespace rosetctl
