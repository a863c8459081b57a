// Enforcing cluster/authorization_table.h: one gRPC server interceptor decides every call, on
// every server (the unix socket and in-process channel, the TLS listeners), before any handler
// runs, from the caller's certificate (cluster/peer_authority.h), the method, the metadata and
// the parsed request. Handlers and the proxy do not judge callers themselves: each entry point
// (daemon/call_log.h's run_logged through the call gate, daemon/call_gate.h, which this module
// implements; the streaming and forwarding ones) asks authorization_of() for the
// decision, and a call the interceptor did not decide is refused (fail closed).
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/node_revocations.h"
#include "cluster/peer_authority.h"
#include "core/status.h"
#include "daemon/call_gate.h"
#include "daemon/service_context.h"

namespace rosetctl {

// What the decision needs of the server that answers.
struct AnsweringServer {
  std::string node_id;  // its node id (a controller's: the controller host's)
  bool controller;      // it has a registry: serve --role controller or all
  bool node;            // it serves Node, NodeState and ObjectStore: --role node or all
};

// The server a plugin of these options runs: a registry unless --role node, the node side
// unless --role controller.
AnsweringServer answering_server(const PluginOptions& options);

// One call as the decision sees it.
struct CallToDecide {
  Peer peer;
  std::string_view method;                       // the full name
  const google::protobuf::Message* request;      // null: not parsed here (the proxy's bytes)
  std::optional<std::string_view> forwarded_to;  // kProxyNodeKey's value, when present
  // It carries a transfer grant (cluster/transfer_grants.h). Only whether: the grant is checked
  // where it is known, by the source's handler or the controller's proxy.
  bool carries_grant = false;
};

// OK when `call.peer` may make the call; PERMISSION_DENIED naming the certificate, the method
// and what it may not touch otherwise. Pure: the table, the server and the call decide.
Status decide(const AnsweringServer& server, const CallToDecide& call);

// The node a request acts for: its `node_id` ("" when the field is there but empty: every node);
// nullopt when it has no such field.
std::optional<std::string> node_id_of(const google::protobuf::Message& request);

// Every other node a request names: the node of every placed id (and of an id wrapped in one),
// every topology.rosetctl.io/node segment, the node a combined list's starting_token goes on
// at. In the order met.
std::vector<std::string> nodes_named_by(const google::protobuf::Message& request);

// decide() again once the request a generic service received as bytes (the proxy, decided on
// its metadata alone) is parsed by the method's request type: so the request names no other
// node on this route either. INVALID_ARGUMENT when the bytes are no such request.
Status decide_forwarded_bytes(const AnsweringServer& server, const grpc::ServerContextBase& call,
                              std::string_view method, std::string_view forwarded_to,
                              const grpc::ByteBuffer& bytes);

// The interceptor to put first on every server of the plugin. A call the table allows is then
// refused when `revoked` refuses its caller (a controller's: cluster/node_revocations.h).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> authorization_interceptor(
    AnsweringServer server, RevocationCheck revoked = nullptr);

// The interceptor's decision for `call`; PERMISSION_DENIED when it made none (a server
// without the interceptor, a method it never saw): handlers fail closed.
Status authorization_of(const grpc::ServerContextBase& call);

// The decision and the caller it was made for (peer_of(call), read once by the interceptor).
struct CallDecision {
  Status status;
  Peer peer;
};
CallDecision decision_of(const grpc::ServerContextBase& call);

// The daemon's call gate (daemon/call_gate.h) over these decisions: the status and the caller
// decision_of() gives, and the transfer grant a call carries (transfer_grants.h CarriedGrant)
// made current on its handler's thread. The assembly sets it (cluster/plugin.cc).
const CallGate& authorization_gate();

}  // namespace rosetctl
