// Reading the caller's certificate from gRPC's auth context (peer_authority.h).
#include "cluster/peer_authority.h"

#include <grpc/grpc_security_constants.h>

#include <mutex>
#include <unordered_map>

#include "core/validate.h"
#include "core/x509/certificates.h"

namespace rosetctl {
namespace {

std::string property(const grpc::AuthContext& context, const char* name) {
  auto values = context.FindPropertyValues(name);
  return values.empty() ? std::string() : std::string(values.front().data(), values.front().size());
}

// Certificates seen, by their PEM text: parsing one costs tens of microseconds, and a peer
// shows the same one on every call of its connection. Bounded: emptied when full.
class PeerCache {
 public:
  Peer find_or_read(const std::string& pem) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = peers_.find(pem);
      if (it != peers_.end()) return it->second;
    }
    Peer peer = peer_from_certificate(pem);
    std::lock_guard<std::mutex> lock(mutex_);
    if (peers_.size() >= kMaxPeers) peers_.clear();
    peers_.emplace(pem, peer);
    return peer;
  }

 private:
  static constexpr std::size_t kMaxPeers = 256;
  std::mutex mutex_;
  std::unordered_map<std::string, Peer> peers_;  // guarded by mutex_
};

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
    case PeerRole::kAnonymous:
      return "a TLS peer without a certificate";
    case PeerRole::kUnknown:
      break;
  }
  return fmt::format("certificate {} (no rosetctl role)", display_quoted(name));
}

std::string Peer::log_field() const {
  static constexpr const char* kRoles[] = {"local", "admin",   "controller",
                                           "node",  "unknown", "anonymous"};
  return fmt::format("{}:{}", kRoles[static_cast<int>(role)], escape_text(name));
}

Peer peer_from_certificate(std::string_view pem) {
  Peer peer{PeerRole::kUnknown, ""};
  auto identity = read_certificate_identity(pem);
  if (!identity) return peer;
  peer.name = identity->common_name;
  peer.not_before = identity->not_before_unix;
  CertificateRole role;
  if (identity->role == "admin") {
    role = CertificateRole::kAdmin;
    peer.role = PeerRole::kAdmin;
  } else if (identity->role == "controller") {
    role = CertificateRole::kController;
    peer.role = PeerRole::kController;
  } else if (identity->role == "node") {
    role = CertificateRole::kNode;
    peer.role = PeerRole::kNode;
  } else {
    return peer;
  }
  // A name the role could not have been issued with (a CN "x,OU=admin", bytes a node id never
  // holds) is no identity at all.
  if (!validate_common_name(role, peer.name)) peer.role = PeerRole::kUnknown;
  return peer;
}

Peer peer_of(const grpc::ServerContextBase& call) {
  std::shared_ptr<const grpc::AuthContext> context = call.auth_context();
  if (context == nullptr) return Peer{};
  // Failing closed: only a connection without transport security and without a certificate is
  // this host's (the in-process channel, the unix socket; TCP listeners are TLS only). Anything
  // else is judged by its certificate, and one without a rosetctl role may do nothing.
  std::string security = property(*context, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  std::string pem = property(*context, GRPC_X509_PEM_CERT_PROPERTY_NAME);
  bool insecure = security.empty() || security == "insecure" || security == "local";
  if (insecure && pem.empty()) return Peer{};
  // TLS without a client certificate: only the enrollment listener does not ask for one.
  if (pem.empty()) return Peer{PeerRole::kAnonymous, ""};
  static auto* const kCache = new PeerCache();
  return kCache->find_or_read(pem);
}

}  // namespace rosetctl
