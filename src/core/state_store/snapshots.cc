// Snapshot records: pending, ready or failed, taken here or pulled from another node.
#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {
namespace {

constexpr const char* kSnapshotColumns =
    "id, name, provider, source_volume_id, source_volume_name, parent_id, message, parameters, "
    "size_bytes, file_count, new_bytes, created_at_ns, commit_id, ready, failure_code, failure, "
    "context, source_capacity_bytes, pulled_from";

Expected<SnapshotRecord> read_snapshot(const sqlite::Statement& row) {
  SnapshotRecord snapshot;
  snapshot.id = row.column_text(0);
  snapshot.name = row.column_text(1);
  snapshot.provider = row.column_text(2);
  snapshot.source_volume_id = row.column_text(3);
  snapshot.source_volume_name = row.column_text(4);
  snapshot.parent_id = row.column_text(5);
  snapshot.message = row.column_text(6);
  Expected<StringMap> parameters = from_json(row.column_text(7), "snapshots.parameters");
  if (!parameters) return parameters.status();
  snapshot.parameters = std::move(*parameters);
  snapshot.size_bytes = row.column_int64(8);
  snapshot.file_count = row.column_int64(9);
  snapshot.new_bytes = row.column_int64(10);
  snapshot.created_at_ns = row.column_int64(11);
  snapshot.commit_id = row.column_text(12);
  snapshot.ready = row.column_bool(13);
  snapshot.failure_code = static_cast<int>(row.column_int64(14));
  snapshot.failure = row.column_text(15);
  Expected<StringMap> context = from_json(row.column_text(16), "snapshots.context");
  if (!context) return context.status();
  snapshot.context = std::move(*context);
  snapshot.source_capacity_bytes = row.column_int64(17);
  snapshot.pulled_from = row.column_text(18);
  return snapshot;
}

}  // namespace

Status StateStore::insert_snapshot(const SnapshotRecord& snapshot) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::optional<std::string>> holder = select_one<std::string>(
        prepare(connection, "SELECT name FROM snapshots WHERE id = ?1", snapshot.id), read_text);
    if (!holder) return holder.status();
    if (*holder) {
      return error(Code::kAlreadyExists, "snapshot {} is already recorded, named \"{}\"",
                   snapshot.id, **holder);
    }
    holder = select_one<std::string>(
        prepare(connection, "SELECT id FROM snapshots WHERE name = ?1", snapshot.name), read_text);
    if (!holder) return holder.status();
    if (*holder) {
      return error(Code::kAlreadyExists, "snapshot name \"{}\" is already taken by snapshot {}",
                   snapshot.name, **holder);
    }
    return run(prepare(connection,
                       fmt::format("INSERT INTO snapshots ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                                   "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
                                   kSnapshotColumns),
                       snapshot.id, snapshot.name, snapshot.provider, snapshot.source_volume_id,
                       snapshot.source_volume_name, snapshot.parent_id, snapshot.message,
                       to_json(snapshot.parameters), snapshot.size_bytes, snapshot.file_count,
                       snapshot.new_bytes, snapshot.created_at_ns, snapshot.commit_id,
                       snapshot.ready, snapshot.failure_code, snapshot.failure,
                       to_json(snapshot.context), snapshot.source_capacity_bytes,
                       snapshot.pulled_from));
  });
}

Status StateStore::set_snapshot_pulled_from(std::string_view id, std::string_view node) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection, "UPDATE snapshots SET pulled_from = ?2 WHERE id = ?1", id, node)));
    if (connection.changes() == 0) {
      return error(Code::kNotFound, "snapshot {} is no longer recorded", id);
    }
    return Status::ok();
  });
}

Status StateStore::update_snapshot(const SnapshotRecord& snapshot) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(run(prepare(
        connection,
        "UPDATE snapshots SET commit_id = ?2, parent_id = ?3, size_bytes = ?4, "
        "file_count = ?5, new_bytes = ?6, created_at_ns = ?7, ready = ?8, failure_code = ?9, "
        "failure = ?10, context = ?11 WHERE id = ?1",
        snapshot.id, snapshot.commit_id, snapshot.parent_id, snapshot.size_bytes,
        snapshot.file_count, snapshot.new_bytes, snapshot.created_at_ns, snapshot.ready,
        snapshot.failure_code, snapshot.failure, to_json(snapshot.context))));
    if (connection.changes() == 0) {
      return error(Code::kNotFound, "snapshot {} is no longer recorded", snapshot.id);
    }
    return Status::ok();
  });
}

Expected<std::optional<SnapshotRecord>> StateStore::find_snapshot(std::string_view id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection, fmt::format("SELECT {} FROM snapshots WHERE id = ?1", kSnapshotColumns),
                id),
        read_snapshot);
  });
}

Expected<std::optional<SnapshotRecord>> StateStore::find_snapshot_by_name(std::string_view name) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection,
                fmt::format("SELECT {} FROM snapshots WHERE name = ?1", kSnapshotColumns), name),
        read_snapshot);
  });
}

Expected<std::optional<SnapshotRecord>> StateStore::find_snapshot_by_commit(
    std::string_view commit_id) {
  if (commit_id.empty()) return std::optional<SnapshotRecord>();
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection,
                fmt::format("SELECT {} FROM snapshots WHERE commit_id = ?1", kSnapshotColumns),
                commit_id),
        read_snapshot);
  });
}

Expected<std::vector<SnapshotRecord>> StateStore::list_snapshots(
    std::string_view after_id, int limit, std::string_view source_volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM snapshots WHERE id > ?1 AND (?2 = '' OR "
                                          "source_volume_id = ?2) ORDER BY id LIMIT ?3",
                                          kSnapshotColumns),
                              after_id, source_volume_id, limit > 0 ? limit : -1),
                      read_snapshot);
  });
}

Expected<std::optional<SnapshotRecord>> StateStore::latest_snapshot_of(
    std::string_view source_volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(prepare(connection,
                              fmt::format("SELECT {} FROM snapshots WHERE source_volume_id = ?1 "
                                          "AND ready ORDER BY created_at_ns DESC, id DESC LIMIT 1",
                                          kSnapshotColumns),
                              source_volume_id),
                      read_snapshot);
  });
}

Status StateStore::delete_snapshot(std::string_view id) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection, "DELETE FROM snapshots WHERE id = ?1", id));
  });
}

}  // namespace rosetctl
