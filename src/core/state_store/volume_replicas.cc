// Volume replicas (StateStore: put_volume_replica ... record_volume_replica_round): the
// controller's record of which placed volume keeps its latest snapshot on which other node, and
// how its last round went (cluster/replica_loop.h runs the rounds).
#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {
namespace {

constexpr const char* kColumns =
    "volume_id, to_node, every_seconds, next_due_unix, snapshot_id, source_snapshot_id, "
    "last_success_unix, last_bytes_sent, rounds, last_error, last_error_unix";

Expected<VolumeReplicaRecord> read_replica(const sqlite::Statement& row) {
  VolumeReplicaRecord replica;
  replica.volume_id = row.column_text(0);
  replica.to_node = row.column_text(1);
  replica.every_seconds = row.column_int64(2);
  replica.next_due_unix = row.column_int64(3);
  replica.snapshot_id = row.column_text(4);
  replica.source_snapshot_id = row.column_text(5);
  replica.last_success_unix = row.column_int64(6);
  replica.last_bytes_sent = row.column_int64(7);
  replica.rounds = row.column_int64(8);
  replica.last_error = row.column_text(9);
  replica.last_error_unix = row.column_int64(10);
  return replica;
}

Status not_replicated(std::string_view volume_id) {
  return error(Code::kNotFound, "volume \"{}\" has no replica", volume_id);
}

}  // namespace

Status StateStore::put_volume_replica(std::string_view volume_id, std::string_view to_node,
                                      int64_t every_seconds, int64_t next_due_unix) {
  return write([&](sqlite::Connection& connection) -> Status {
    // Another target: the last round's snapshots are the old target's, no base for the new one.
    ROSETCTL_RETURN_IF_ERROR(run(
        prepare(connection, "DELETE FROM volume_replicas WHERE volume_id = ?1 AND to_node <> ?2",
                volume_id, to_node)));
    return run(prepare(connection,
                       "INSERT INTO volume_replicas (volume_id, to_node, every_seconds, "
                       "next_due_unix) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (volume_id) DO UPDATE "
                       "SET every_seconds = ?3, next_due_unix = ?4",
                       volume_id, to_node, every_seconds, next_due_unix));
  });
}

Status StateStore::remove_volume_replica(std::string_view volume_id) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection, "DELETE FROM volume_replicas WHERE volume_id = ?1", volume_id));
  });
}

Expected<std::optional<VolumeReplicaRecord>> StateStore::find_volume_replica(
    std::string_view volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection,
                fmt::format("SELECT {} FROM volume_replicas WHERE volume_id = ?1", kColumns),
                volume_id),
        read_replica);
  });
}

Expected<std::vector<VolumeReplicaRecord>> StateStore::list_volume_replicas() {
  return read([&](sqlite::Connection& connection) {
    return select_all(
        prepare(connection,
                fmt::format("SELECT {} FROM volume_replicas ORDER BY volume_id", kColumns)),
        read_replica);
  });
}

Status StateStore::set_volume_replica_due(std::string_view volume_id, int64_t next_due_unix) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(run(
        prepare(connection, "UPDATE volume_replicas SET next_due_unix = ?2 WHERE volume_id = ?1",
                volume_id, next_due_unix)));
    if (connection.changes() == 0) return not_replicated(volume_id);
    return Status::ok();
  });
}

Status StateStore::record_volume_replica_round(const VolumeReplicaRecord& round) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection,
                    "UPDATE volume_replicas SET snapshot_id = ?3, source_snapshot_id = ?4, "
                    "last_success_unix = ?5, last_bytes_sent = ?6, rounds = ?7, last_error = ?8, "
                    "last_error_unix = ?9 WHERE volume_id = ?1 AND to_node = ?2",
                    round.volume_id, round.to_node, round.snapshot_id, round.source_snapshot_id,
                    round.last_success_unix, round.last_bytes_sent, round.rounds, round.last_error,
                    round.last_error_unix)));
    if (connection.changes() == 0) return not_replicated(round.volume_id);
    return Status::ok();
  });
}

}  // namespace rosetctl
