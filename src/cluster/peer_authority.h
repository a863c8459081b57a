// Who is calling. A call that did not come over TLS came from this host (the in-process channel
// of a CLI run, or serve's unix socket, mode 0660). Over TLS the client's certificate (rosetctl
// tls issue) says who it is: its subject's OU is the role and its CN the name, read through
// libcrypto's X.509 API. What each role may do is cluster/authorization_table.h's.
#pragma once

#include <grpcpp/server_context.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

// kAnonymous: a TLS peer that showed no certificate, which only the enrollment listener lets in
// (serve --enroll-listen); kUnknown: a certificate without a rosetctl role.
enum class PeerRole { kLocal, kAdmin, kController, kNode, kUnknown, kAnonymous };

struct Peer {
  PeerRole role = PeerRole::kLocal;
  std::string name;  // the certificate's CN; "" for a local caller
  // The certificate's notBefore (unix seconds; 0 for a local caller): a node's certificates
  // from before its revocation are refused (cluster/node_revocations.h).
  int64_t not_before = 0;

  // "node certificate \"node-a\"", "a local caller": for messages.
  std::string describe() const;
  // "node:node-a", "admin:alice", escaped: the peer= field of a call's log line.
  std::string log_field() const;
};

// The metadata key that asks a controller to forward a call to a registered node.
inline constexpr const char* kProxyNodeKey = "rosetctl-node";

Peer peer_of(const grpc::ServerContextBase& call);

// The role and name a PEM certificate names (core/x509/certificates.h read_certificate_identity):
// kUnknown unless it has exactly one OU, one CN, and the CN is a valid name for the role.
Peer peer_from_certificate(std::string_view pem);

}  // namespace rosetctl
