// Revoked node certificates. `node remove --revoke` records when a node's certificates were
// revoked (StateStore::revoke_node_certificates); from then on the controller refuses every
// certificate of that node whose validity starts at or before that time, on every call, in the
// authorization interceptor (cluster/authorization.h). rosetctl backdates the certificates it
// issues by 5 minutes against clock skew, so one issued within 5 minutes after a revocation is
// refused too: the refusal says from when a new one is taken.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "cluster/peer_authority.h"
#include "core/state_store.h"
#include "core/status.h"

namespace rosetctl {

// OK, or PERMISSION_DENIED when `peer` is a node certificate from before `revoked_at`.
using RevocationCheck = std::function<Status(const Peer& peer)>;

// The decision alone: PERMISSION_DENIED when `peer` is a node certificate whose notBefore is at
// or before `revoked_at`, naming the node, both times and what lets it in again.
Status check_not_revoked(const Peer& peer, std::optional<int64_t> revoked_at);

// The controller's check: its store says when each node's certificates were revoked. A store
// that cannot be read refuses the call (UNAVAILABLE): a revocation is never skipped.
RevocationCheck revocation_check_of(StateStore& store);

}  // namespace rosetctl
