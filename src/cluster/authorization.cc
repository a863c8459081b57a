// The decision of authorization.h and the interceptor that makes it for every call.
#include "cluster/authorization.h"

#include <fmt/ranges.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cluster/authorization_table.h"
#include "cluster/placed_fields.h"
#include "cluster/placed_id.h"
#include "cluster/transfer_grants.h"
#include "core/validate.h"
#include "daemon/convert.h"

namespace rosetctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

bool has_role(Callers callers, PeerRole role) {
  switch (role) {
    case PeerRole::kAdmin:
      return (callers & kAdmins) != 0;
    case PeerRole::kController:
      return (callers & kControllers) != 0;
    case PeerRole::kNode:
      return (callers & kNodes) != 0;
    case PeerRole::kAnonymous:
      return (callers & kUnauthenticated) != 0;
    case PeerRole::kLocal:
    case PeerRole::kUnknown:
      break;
  }
  return false;
}

// topology.rosetctl.io/node segments of every csi.v1.Topology in `message`, at any depth.
void add_topology_nodes(const Message& message, std::vector<std::string>* nodes) {
  const auto* reflection = message.GetReflection();
  if (message.GetDescriptor()->full_name() == "csi.v1.Topology") {
    const FieldDescriptor* segments = message.GetDescriptor()->FindFieldByName("segments");
    for (int i = 0; i < reflection->FieldSize(message, segments); ++i) {
      const Message& entry = reflection->GetRepeatedMessage(message, segments, i);
      const auto* entry_reflection = entry.GetReflection();
      const auto* key = entry.GetDescriptor()->FindFieldByName("key");
      const auto* value = entry.GetDescriptor()->FindFieldByName("value");
      if (entry_reflection->GetString(entry, key) == kTopologyNodeKey) {
        nodes->push_back(entry_reflection->GetString(entry, value));
      }
    }
    return;
  }
  (void)for_each_submessage(message, [nodes](const Message& inner) {
    add_topology_nodes(inner, nodes);
    return Status::ok();
  });
}

constexpr std::string_view kNoGrant =
    "a node reads another node's snapshots only for a transfer the controller started, and this "
    "call carries no transfer grant of it. Move a snapshot between nodes through the controller "
    "with an admin's certificate: rosetctl --controller ADDRESS --on-node RECEIVER snapshot pull "
    "SNAPSHOT --from-node SOURCE (or snapshot push SNAPSHOT --from-node SOURCE --to-node "
    "RECEIVER), or volume create NAME --node RECEIVER --from-snapshot SNAPSHOT-ID";

Status refused(const CallToDecide& call, std::string_view where, std::string_view why) {
  return error(Code::kPermissionDenied, "{} may not call {} {}: {}", call.peer.describe(),
               call.method, where, why);
}

// A role's refusal names the certificates that may make the call: the fix (for a node's
// `snapshot verify`, an admin's certificate).
std::string role_refusal(Callers callers, bool node_side) {
  std::vector<std::string_view> roles;
  if ((callers & kAdmins) != 0) roles.push_back("an admin's");
  if ((callers & kControllers) != 0) roles.push_back("a controller's");
  if ((callers & kNodes) != 0) roles.push_back("a node's");
  std::string_view where = node_side ? "on a node" : "on a controller";
  if (roles.empty()) return fmt::format("no certificate may make it {}", where);
  return fmt::format("that role may not make it {}; {} certificate may", where,
                     fmt::join(roles, " or "));
}

std::string node_text(std::string_view node) {
  return node.empty() ? std::string("every node") : "node " + display_quoted(node);
}

// A node certificate's binding (authorization_table.h NodeBinding) for a call answered by
// `answering_node` ("" where a controller answers for its host).
Status check_node_binding(const AnsweringServer& server, const CallToDecide& call,
                          NodeBinding binding, std::string_view answering_node,
                          std::string_view where) {
  const std::string& self = call.peer.name;
  switch (binding) {
    case NodeBinding::kAnyNode:
      return Status::ok();
    case NodeBinding::kGrantedReceiver:
      if (answering_node == self) return Status::ok();
      if (!call.carries_grant) return refused(call, where, kNoGrant);
      return Status::ok();  // held to the grant where it is known (transfer_grants.h)
    case NodeBinding::kOwnNode:
      if (answering_node != self) {
        return refused(call, where, "a node acts only on itself");
      }
      break;
    case NodeBinding::kOwnNodes:
      break;
  }
  if (call.request == nullptr) return Status::ok();  // forwarded bytes: decided again on them
  // The node a request acts for (a registration, a publication) is the caller, strictly: the
  // controller host's node is not a consumer's to register, remove or publish to.
  if (auto acting_for = node_id_of(*call.request); acting_for && *acting_for != self) {
    return refused(call, "for " + node_text(*acting_for), "a node acts only for itself");
  }
  for (const std::string& node : nodes_named_by(*call.request)) {
    // The controller host's own volumes are every consumer's to manage.
    bool shared = binding == NodeBinding::kOwnNodes && server.controller &&
                  node == server.node_id && !node.empty();
    if (node != self && !shared) {
      return refused(call, "for " + node_text(node), "a node acts only for itself");
    }
  }
  return Status::ok();
}

}  // namespace

std::optional<std::string> node_id_of(const Message& request) {
  const auto* node_id = request.GetDescriptor()->FindFieldByName("node_id");
  if (node_id == nullptr || node_id->cpp_type() != FieldDescriptor::CPPTYPE_STRING ||
      node_id->is_repeated()) {
    return std::nullopt;
  }
  return request.GetReflection()->GetString(request, node_id);
}

std::vector<std::string> nodes_named_by(const Message& request) {
  std::vector<std::string> nodes = placed_nodes_of(request);
  add_topology_nodes(request, &nodes);
  // A combined list's token names the node it goes on at (cluster/placed_id.h).
  const auto* token = request.GetDescriptor()->FindFieldByName("starting_token");
  if (token != nullptr && token->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    if (auto position = decode_list_token(request.GetReflection()->GetString(request, token)))
      nodes.push_back(std::move(position->node));
  }
  return nodes;
}

AnsweringServer answering_server(const PluginOptions& options) {
  return {.node_id = options.node_id,
          .controller = options.role != PluginRole::kNode,
          .node = options.role != PluginRole::kController};
}

Status decide(const AnsweringServer& server, const CallToDecide& call) {
  const MethodAccess* access = find_method_access(call.method);
  if (access == nullptr) {
    // Nothing runs either way; this host's callers (kubelet, the CSI sidecars probing optional
    // services) get the answer gRPC gives for a method nobody serves.
    if (call.peer.role == PeerRole::kLocal) {
      return error(Code::kUnimplemented, "rosetctl serves no method {}",
                   escape_text(call.method.substr(0, 200)));
    }
    return error(Code::kPermissionDenied,
                 "{} is not in rosetctl's authorization table (docs/SECURITY.md): nobody may "
                 "call it",
                 escape_text(call.method.substr(0, 200)));
  }
  if (call.peer.role == PeerRole::kLocal) return Status::ok();
  if (call.peer.role == PeerRole::kUnknown) {
    return error(Code::kPermissionDenied,
                 "{} may not call {}: its subject names no rosetctl role (exactly one OU=admin, "
                 "controller or node, and one CN); issue certificates with rosetctl tls issue",
                 call.peer.describe(), call.method);
  }
  // Who answers: a node the call is forwarded to, this server's own node side, or a controller.
  // Only node-side calls are forwarded by their metadata (cluster/node_proxy.h, node_forward.h);
  // on other calls it changes nothing.
  bool forwarded = node_side_service(call.method) && call.forwarded_to.has_value() &&
                   (*call.forwarded_to != server.node_id || !server.node);
  bool node_side = forwarded || (node_side_service(call.method) && server.node) ||
                   (!server.controller && server.node);
  if (!forwarded && node_side_service(call.method) && !server.node) {
    return Status::ok();  // not served here: the proxy answers UNIMPLEMENTED, nothing runs
  }
  std::string answering_node = forwarded   ? std::string(*call.forwarded_to)
                               : node_side ? server.node_id
                                           : std::string();
  std::string where = node_side ? "on " + node_text(answering_node) : "on the controller";
  if (!has_role(node_side ? access->on_node : access->on_controller, call.peer.role)) {
    return refused(call, where,
                   role_refusal(node_side ? access->on_node : access->on_controller, node_side));
  }
  if (call.peer.role != PeerRole::kNode) return Status::ok();
  // A node names no other node, even where the metadata would change nothing.
  if (!forwarded && call.forwarded_to.has_value() && *call.forwarded_to != call.peer.name) {
    return refused(call, "for " + node_text(*call.forwarded_to), "a node acts only for itself");
  }
  return check_node_binding(server, call, access->node_binding, answering_node, where);
}

Status decide_forwarded_bytes(const AnsweringServer& server, const grpc::ServerContextBase& call,
                              std::string_view method, std::string_view forwarded_to,
                              const grpc::ByteBuffer& bytes) {
  Peer peer = peer_of(call);
  if (peer.role != PeerRole::kNode) return Status::ok();  // only a node's binding reads it
  size_t slash = method.rfind('/');
  const auto* descriptor =
      slash == std::string_view::npos || slash == 0
          ? nullptr
          : google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
                fmt::format("{}.{}", method.substr(1, slash - 1), method.substr(slash + 1)));
  if (descriptor == nullptr) return Status::ok();  // not in the table: refused already
  std::unique_ptr<Message> request(google::protobuf::MessageFactory::generated_factory()
                                       ->GetPrototype(descriptor->input_type())
                                       ->New());
  grpc::ByteBuffer copy(bytes);  // Deserialize consumes its buffer
  if (!grpc::SerializationTraits<Message>::Deserialize(&copy, request.get()).ok()) {
    return error(Code::kInvalidArgument, "{}: the request is not a {}", escape_text(method),
                 descriptor->input_type()->full_name());
  }
  bool carries_grant = call.client_metadata().contains(kTransferGrantKey);
  return decide(server, CallToDecide{peer, method, request.get(), forwarded_to, carries_grant});
}

namespace {

using grpc::experimental::InterceptionHookPoints;

// Decisions of calls in flight, by their server context: made by the interceptor, read by the
// call's entry point, removed when the call ends. With the caller the decision was made for, so
// the entry point need not read the connection's authentication context again. Split in shards
// by the context's address: every call of every thread passes here twice, and one mutex for all
// was contended under load (bench/README.md, issue 35).
class Decisions {
 public:
  void put(const grpc::ServerContextBase* call, CallDecision decision) {
    Shard& shard = shard_of(call);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.decisions.insert_or_assign(call, std::move(decision));
  }
  void remove(const grpc::ServerContextBase* call) {
    Shard& shard = shard_of(call);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.decisions.erase(call);
  }
  CallDecision get(const grpc::ServerContextBase* call) {
    Shard& shard = shard_of(call);
    {
      std::lock_guard<std::mutex> lock(shard.mutex);
      auto it = shard.decisions.find(call);
      if (it != shard.decisions.end()) return it->second;
    }
    return {error(Code::kPermissionDenied,
                  "this call was not authorized: it did not pass rosetctl's authorization "
                  "interceptor"),
            peer_of(*call)};
  }

 private:
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::mutex mutex;
    std::unordered_map<const grpc::ServerContextBase*, CallDecision> decisions;  // by mutex
  };
  Shard& shard_of(const grpc::ServerContextBase* call) {
    // Contexts are heap objects of one size: the low bits say little.
    auto address = reinterpret_cast<std::uintptr_t>(call);
    return shards_[(address >> 6) % kShards];
  }

  std::array<Shard, kShards> shards_;
};

Decisions& decisions() {
  static auto* const kDecisions = new Decisions();
  return *kDecisions;
}

class Authorize final : public grpc::experimental::Interceptor {
 public:
  Authorize(const AnsweringServer& server, const RevocationCheck& revoked,
            grpc::experimental::ServerRpcInfo* info)
      : server_(server), revoked_(revoked), info_(info) {}
  ~Authorize() override {
    if (decided_) decisions().remove(info_->server_context());
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // The generic proxy reads its bytes later; it is decided on its metadata alone. The
    // generated services have their request parsed by now.
    bool bytes_only = info_->type() == grpc::experimental::ServerRpcInfo::Type::BIDI_STREAMING;
    if (!decided_ && ((bytes_only && methods->QueryInterceptionHookPoint(
                                         InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) ||
                      (!bytes_only && methods->QueryInterceptionHookPoint(
                                          InterceptionHookPoints::POST_RECV_MESSAGE)))) {
      // Only our generated (protobuf) services have typed requests here: a Message.
      const auto* request =
          bytes_only ? nullptr : static_cast<const Message*>(methods->GetRecvMessage());
      decide_now(request);
    }
    methods->Proceed();
  }

 private:
  void decide_now(const Message* request) {
    grpc::ServerContextBase& call = *info_->server_context();
    CallToDecide facts{peer_of(call), info_->method(), request, std::nullopt};
    const auto& metadata = call.client_metadata();
    auto named = metadata.find(kProxyNodeKey);
    if (named != metadata.end())
      facts.forwarded_to.emplace(named->second.data(), named->second.size());
    facts.carries_grant = metadata.contains(kTransferGrantKey);
    Status decision = decide(server_, facts);
    if (decision.is_ok() && revoked_) decision = revoked_(facts.peer);
    decisions().put(&call, CallDecision{std::move(decision), std::move(facts.peer)});
    decided_ = true;
  }

  const AnsweringServer& server_;
  const RevocationCheck& revoked_;
  grpc::experimental::ServerRpcInfo* info_;
  bool decided_ = false;
};

class AuthorizeFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  AuthorizeFactory(AnsweringServer server, RevocationCheck revoked)
      : server_(std::move(server)), revoked_(std::move(revoked)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new Authorize(server_, revoked_, info);
  }

 private:
  AnsweringServer server_;
  RevocationCheck revoked_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> authorization_interceptor(
    AnsweringServer server, RevocationCheck revoked) {
  return std::make_unique<AuthorizeFactory>(std::move(server), std::move(revoked));
}

Status authorization_of(const grpc::ServerContextBase& call) {
  return decisions().get(&call).status;
}

CallDecision decision_of(const grpc::ServerContextBase& call) {
  return decisions().get(&call);
}

namespace {

class GrantCarried final : public CallCarried {
 public:
  explicit GrantCarried(std::string token) : carried_(std::move(token)) {}

 private:
  CarriedGrant carried_;
};

class AuthorizationGate final : public CallGate {
 public:
  CallAdmission admission_of(const grpc::ServerContextBase& call) const override {
    CallDecision decision = decision_of(call);
    bool local = decision.peer.role == PeerRole::kLocal;
    return {std::move(decision.status), local, local ? "" : decision.peer.log_field()};
  }
  std::unique_ptr<CallCarried> carried_by(const grpc::ServerContextBase& call) const override {
    std::string token = carried_grant(call);
    // No grant, and none of an outer call to hide on this thread: nothing to hold.
    if (token.empty() && CarriedGrant::current().empty()) return nullptr;
    return std::make_unique<GrantCarried>(std::move(token));
  }
};

}  // namespace

const CallGate& authorization_gate() {
  static const auto* const kGate = new AuthorizationGate();  // outlives every server
  return *kGate;
}

}  // namespace rosetctl
