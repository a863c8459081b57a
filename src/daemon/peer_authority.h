// Who is calling, and what they may do: authorization by certificate, as OIM does it.
//
// A call that did not come over TLS came from this host (the in-process channel of a CLI run,
// or serve's unix socket, mode 0660), and may do everything. Over TLS the client's certificate
// (rosetctl tls issue) says who it is: its subject's OU is the role and its CN the name.
//   admin       anything;
//   controller  anything (a controller calls the nodes it proxies to);
//   node        anything but acting as another node: a request naming a node (node_id) must
//               name this one, and a call proxied to a node must go to this one, except
//               the ObjectStore calls that only read a node's commit store (LookupSnapshot,
//               FetchObjects): any node may make those of any other, which is
//               how a snapshot is pulled from one node to another. Writing into a store
//               (PullSnapshot) names its node, so a node does it only to itself.
// A refused call is PERMISSION_DENIED naming the certificate and what it tried; nothing runs.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>

#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

enum class PeerRole { kLocal, kAdmin, kController, kNode, kUnknown };

struct Peer {
  PeerRole role = PeerRole::kLocal;
  std::string name;  // the certificate's CN; "" for a local caller

  // "node certificate \"node-a\"", "a local caller": for messages.
  std::string describe() const;
  // "node:node-a", "admin:alice", escaped: the peer= field of a call's log line.
  std::string log_field() const;
};

// The metadata key that asks a controller to forward a call to a registered node.
inline constexpr const char* kProxyNodeKey = "rosetctl-node";

Peer peer_of(const grpc::ServerContextBase& call);

// Whether `peer` may make this call.
Status authorize(const Peer& peer, const grpc::ServerContextBase& call, std::string_view method,
                 const google::protobuf::Message& request);

// Whether `peer` may have `method` forwarded to `node` (the controller's proxy): a node only to
// itself, but for the reading calls below.
Status authorize_forward(const Peer& peer, std::string_view method, std::string_view node);

// Whether `method` (its full name, "/rosetctl.v1.ObjectStore/FetchObjects") only reads a node's
// commit store, so that any node may call it on any other.
bool reads_other_nodes_objects(std::string_view method);

// The role and name an RFC 2253 subject ("CN=node-a,OU=node,O=rosetctl") names.
Peer peer_from_subject(std::string_view subject);

}  // namespace rosetctl
