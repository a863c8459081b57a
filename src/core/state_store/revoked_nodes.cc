// Revoked node certificates (StateStore::revoke_node_certificates): one row per node, the time
// before which its certificates are refused.
#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {

Status StateStore::revoke_node_certificates(std::string_view node_id, int64_t revoked_at) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       "INSERT INTO revoked_nodes (node_id, revoked_at) VALUES (?1, ?2) ON "
                       "CONFLICT (node_id) DO UPDATE SET revoked_at = max(revoked_at, ?2)",
                       node_id, revoked_at));
  });
}

Expected<std::optional<int64_t>> StateStore::node_certificates_revoked_at(
    std::string_view node_id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection, "SELECT revoked_at FROM revoked_nodes WHERE node_id = ?1", node_id),
        read_int64);
  });
}

}  // namespace rosetctl
