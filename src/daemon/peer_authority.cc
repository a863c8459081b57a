// Reading the caller's certificate from gRPC's auth context, and the rules of peer_authority.h.
#include "daemon/peer_authority.h"

#include <google/protobuf/descriptor.h>
#include <grpc/grpc_security_constants.h>

#include <optional>

#include "core/validate.h"

namespace rosetctl {
namespace {

// The value of one attribute (OU, CN) in an RFC 2253 subject; our names never hold commas.
std::string attribute(std::string_view subject, std::string_view key) {
  size_t start = 0;
  while (start <= subject.size()) {
    size_t comma = std::min(subject.find(',', start), subject.size());
    std::string_view part = subject.substr(start, comma - start);
    while (!part.empty() && part.front() == ' ')
      part.remove_prefix(1);
    if (part.size() > key.size() && part.substr(0, key.size()) == key && part[key.size()] == '=') {
      return std::string(part.substr(key.size() + 1));
    }
    start = comma + 1;
  }
  return "";
}

std::string property(const grpc::AuthContext& context, const char* name) {
  auto values = context.FindPropertyValues(name);
  return values.empty() ? std::string() : std::string(values.front().data(), values.front().size());
}

// The node a request acts for, when it names one (ControllerPublish/Unpublish, the registry).
std::string node_named_by(const google::protobuf::Message& request) {
  const auto* field = request.GetDescriptor()->FindFieldByName("node_id");
  if (field == nullptr || field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_STRING ||
      field->is_repeated()) {
    return "";
  }
  return request.GetReflection()->GetString(request, field);
}

bool names_a_node(const google::protobuf::Message& request) {
  return request.GetDescriptor()->FindFieldByName("node_id") != nullptr;
}

}  // namespace

std::string Peer::describe() const {
  switch (role) {
    case PeerRole::kLocal:
      return "a local caller";
    case PeerRole::kAdmin:
      return fmt::format("admin certificate {}", display_quoted(name));
    case PeerRole::kController:
      return fmt::format("controller certificate {}", display_quoted(name));
    case PeerRole::kNode:
      return fmt::format("node certificate {}", display_quoted(name));
    case PeerRole::kUnknown:
      break;
  }
  return fmt::format("certificate {} (no rosetctl role)", display_quoted(name));
}

std::string Peer::log_field() const {
  static constexpr const char* kRoles[] = {"local", "admin", "controller", "node", "unknown"};
  return fmt::format("{}:{}", kRoles[static_cast<int>(role)], escape_text(name));
}

Peer peer_from_subject(std::string_view subject) {
  Peer peer;
  peer.name = attribute(subject, "CN");
  std::string role = attribute(subject, "OU");
  peer.role = role == "admin"        ? PeerRole::kAdmin
              : role == "controller" ? PeerRole::kController
              : role == "node"       ? PeerRole::kNode
                                     : PeerRole::kUnknown;
  return peer;
}

Peer peer_of(const grpc::ServerContextBase& call) {
  std::shared_ptr<const grpc::AuthContext> context = call.auth_context();
  if (context == nullptr) return Peer{};
  // Failing closed: only a connection without transport security and without a certificate is
  // this host's (the in-process channel, the unix socket; TCP listeners are TLS only). Anything
  // else is judged by its certificate, and one without a rosetctl role may do nothing.
  std::string security = property(*context, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  std::string subject = property(*context, GRPC_X509_SUBJECT_PROPERTY_NAME);
  bool insecure = security.empty() || security == "insecure" || security == "local";
  if (insecure && subject.empty()) return Peer{};
  Peer peer = peer_from_subject(subject);
  if (peer.name.empty()) peer.role = PeerRole::kUnknown;
  return peer;
}

namespace {

// What every role may do before the node rule: OK for this host, admins and controllers;
// refused for a certificate without a role; nullopt for a node, which the caller judges.
std::optional<Status> by_role(const Peer& peer, std::string_view method) {
  switch (peer.role) {
    case PeerRole::kLocal:
    case PeerRole::kAdmin:
    case PeerRole::kController:
      return Status::ok();
    case PeerRole::kUnknown:
      return error(Code::kPermissionDenied,
                   "{} may not call {}: its subject names no rosetctl role (OU=admin, node or "
                   "controller); issue certificates with rosetctl tls issue",
                   peer.describe(), method);
    case PeerRole::kNode:
      break;
  }
  return std::nullopt;
}

}  // namespace

bool reads_other_nodes_objects(std::string_view method) {
  return method == "/rosetctl.v1.ObjectStore/LookupSnapshot" ||
         method == "/rosetctl.v1.ObjectStore/FetchObjects";
}

Status authorize_forward(const Peer& peer, std::string_view method, std::string_view node) {
  if (auto decided = by_role(peer, method)) return *decided;
  if (node == peer.name) return Status::ok();
  // A node pulling a snapshot reads another node's commit store; reading is all it may do there.
  if (reads_other_nodes_objects(method)) return Status::ok();
  return error(Code::kPermissionDenied,
               "{} may not have {} forwarded to node {}: a node acts only for itself",
               peer.describe(), method, display_quoted(node));
}

Status authorize(const Peer& peer, const grpc::ServerContextBase& call, std::string_view method,
                 const google::protobuf::Message& request) {
  if (auto decided = by_role(peer, method)) return *decided;
  const auto& metadata = call.client_metadata();
  auto proxied = metadata.find(kProxyNodeKey);
  if (proxied != metadata.end()) {
    ROSETCTL_RETURN_IF_ERROR(authorize_forward(
        peer, method, std::string_view(proxied->second.data(), proxied->second.size())));
  }
  if (names_a_node(request)) {
    std::string node = node_named_by(request);
    if (node != peer.name) {
      return error(Code::kPermissionDenied,
                   "{} may not call {} for {}: a node acts only for itself", peer.describe(),
                   method,
                   node.empty() ? std::string("every node") : "node " + display_quoted(node));
    }
  }
  return Status::ok();
}

}  // namespace rosetctl
