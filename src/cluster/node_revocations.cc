// Refusing revoked node certificates (node_revocations.h).
#include "cluster/node_revocations.h"

#include "core/clock.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

// What rosetctl's own certificates are backdated by (core/x509/certificates.cc).
constexpr int64_t kIssuedBackdateSeconds = 5 * 60;

}  // namespace

Status check_not_revoked(const Peer& peer, std::optional<int64_t> revoked_at) {
  if (peer.role != PeerRole::kNode || !revoked_at || peer.not_before > *revoked_at) {
    return Status::ok();
  }
  return error(Code::kPermissionDenied,
               "{} (valid from {}) was revoked at {} (`rosetctl node remove {} --revoke`): this "
               "controller refuses every certificate of that node from before then; issue it a "
               "new one after {} (rosetctl backdates certificates by 5 minutes)",
               peer.describe(), utc_time_text(peer.not_before), utc_time_text(*revoked_at),
               display_quoted(peer.name), utc_time_text(*revoked_at + kIssuedBackdateSeconds));
}

RevocationCheck revocation_check_of(StateStore& store) {
  return [&store](const Peer& peer) -> Status {
    if (peer.role != PeerRole::kNode) return Status::ok();
    Expected<std::optional<int64_t>> revoked_at = store.node_certificates_revoked_at(peer.name);
    if (!revoked_at) {
      return error(Code::kUnavailable, "cannot tell whether {} is revoked: {}", peer.describe(),
                   revoked_at.status().message());
    }
    return check_not_revoked(peer, *revoked_at);
  };
}

}  // namespace rosetctl
