// StateStore::node_publish_state: NodePublishVolume's four records in one read transaction.
#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {
namespace {

Expected<StateStore::NodePublishState> read_publish_state(sqlite::Connection& connection,
                                                          std::string_view volume_id,
                                                          std::string_view staging_path,
                                                          std::string_view target_path) {
  StateStore::NodePublishState state;
  auto volume = state_sql::volume_row(connection, volume_id);
  if (!volume) return volume.status();
  state.volume = std::move(*volume);
  auto move = state_sql::volume_move_row(connection, volume_id);
  if (!move) return move.status();
  state.move = std::move(*move);
  auto staging = state_sql::staging_row(connection, volume_id, staging_path);
  if (!staging) return staging.status();
  state.staging = std::move(*staging);
  auto publication = state_sql::node_publication_row(connection, target_path);
  if (!publication) return publication.status();
  state.publication = std::move(*publication);
  return state;
}

}  // namespace

Expected<StateStore::NodePublishState> StateStore::node_publish_state(
    std::string_view volume_id, std::string_view staging_path, std::string_view target_path) {
  return read([&](sqlite::Connection& connection) -> Expected<NodePublishState> {
    // Deferred: the first SELECT takes the read snapshot, COMMIT lets it go (nothing written).
    ROSETCTL_RETURN_IF_ERROR(connection.run("BEGIN"));
    auto state = read_publish_state(connection, volume_id, staging_path, target_path);
    // Ended whatever the reads said; a connection still inside it is not pooled again.
    Status ended = connection.run("COMMIT");
    if (!state) return state.status();
    if (!ended) return ended;
    return state;
  });
}

}  // namespace rosetctl
