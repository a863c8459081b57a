// Volume records (StateStore: insert_volume ... delete_volume), and the per-provider counts
// of volumes and snapshots.
#include <fmt/ranges.h>

#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {
namespace {

constexpr const char* kVolumeColumns =
    "id, name, provider, capacity_bytes, parameters, context, access_type, content_source, "
    "created_at, mutable_parameters";

Expected<VolumeRecord> read_volume(const sqlite::Statement& row) {
  VolumeRecord volume;
  volume.id = row.column_text(0);
  volume.name = row.column_text(1);
  volume.provider = row.column_text(2);
  volume.capacity_bytes = row.column_int64(3);
  Expected<StringMap> parameters = from_json(row.column_text(4), "volumes.parameters");
  if (!parameters) return parameters.status();
  volume.parameters = std::move(*parameters);
  Expected<StringMap> context = from_json(row.column_text(5), "volumes.context");
  if (!context) return context.status();
  volume.context = std::move(*context);
  volume.access_type = row.column_text(6);
  volume.content_source = row.column_text(7);
  volume.created_at = row.column_int64(8);
  Expected<StringMap> mutable_parameters =
      from_json(row.column_text(9), "volumes.mutable_parameters");
  if (!mutable_parameters) return mutable_parameters.status();
  volume.mutable_parameters = std::move(*mutable_parameters);
  return volume;
}

}  // namespace

Status StateStore::insert_volume(const VolumeRecord& volume) {
  return write([&](sqlite::Connection& connection) -> Status {
    // Checked first so the message can say which key clashed, and with whom.
    Expected<std::optional<std::string>> holder = select_one<std::string>(
        prepare(connection, "SELECT name FROM volumes WHERE id = ?1", volume.id), read_text);
    if (!holder) return holder.status();
    if (*holder) {
      return error(Code::kAlreadyExists, "volume id \"{}\" is already taken by volume named \"{}\"",
                   volume.id, **holder);
    }
    holder = select_one<std::string>(
        prepare(connection, "SELECT id FROM volumes WHERE name = ?1", volume.name), read_text);
    if (!holder) return holder.status();
    if (*holder) {
      return error(Code::kAlreadyExists, "volume name \"{}\" is already taken by volume \"{}\"",
                   volume.name, **holder);
    }
    return run(prepare(connection,
                       fmt::format("INSERT INTO volumes ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                                   "?8, ?9, ?10)",
                                   kVolumeColumns),
                       volume.id, volume.name, volume.provider, volume.capacity_bytes,
                       to_json(volume.parameters), to_json(volume.context), volume.access_type,
                       volume.content_source, volume.created_at,
                       to_json(volume.mutable_parameters)));
  });
}

Expected<std::optional<VolumeRecord>> state_sql::volume_row(sqlite::Connection& connection,
                                                            std::string_view id) {
  return select_one(
      prepare(connection, fmt::format("SELECT {} FROM volumes WHERE id = ?1", kVolumeColumns), id),
      read_volume);
}

Expected<std::optional<VolumeRecord>> StateStore::find_volume(std::string_view id) {
  return read(
      [&](sqlite::Connection& connection) { return state_sql::volume_row(connection, id); });
}

Expected<std::optional<VolumeRecord>> StateStore::find_volume_by_name(std::string_view name) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection, fmt::format("SELECT {} FROM volumes WHERE name = ?1", kVolumeColumns),
                name),
        read_volume);
  });
}

Expected<std::vector<VolumeRecord>> StateStore::list_volumes(std::string_view after_id, int limit) {
  return read([&](sqlite::Connection& connection) {
    // SQLite reads a negative LIMIT as "no limit".
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM volumes WHERE id > ?1 ORDER BY id "
                                          "LIMIT ?2",
                                          kVolumeColumns),
                              after_id, limit > 0 ? limit : -1),
                      read_volume);
  });
}

Expected<int64_t> StateStore::count_volumes() {
  return read([&](sqlite::Connection& connection) -> Expected<int64_t> {
    Expected<std::optional<int64_t>> count =
        select_one(prepare(connection, "SELECT COUNT(*) FROM volumes"), read_int64);
    if (!count) return count.status();
    return count->value_or(0);
  });
}

Expected<bool> StateStore::has_volumes_of(std::string_view provider) {
  return read([&](sqlite::Connection& connection) -> Expected<bool> {
    Expected<std::optional<int64_t>> found = select_one(
        prepare(connection, "SELECT 1 FROM volumes WHERE provider = ?1 LIMIT 1", provider),
        read_int64);
    if (!found) return found.status();
    return found->has_value();
  });
}

Status StateStore::check_readable() {
  return read([&](sqlite::Connection& connection) -> Status {
    return select_one(prepare(connection, "SELECT 1 FROM volumes LIMIT 1"), read_int64).status();
  });
}

Expected<std::map<std::string, int64_t>> StateStore::count_volumes_by_provider() {
  return read([&](sqlite::Connection& connection) {
    return count_by_provider(connection,
                             "SELECT provider, COUNT(*) FROM volumes GROUP BY provider");
  });
}

Expected<std::map<std::string, int64_t>> StateStore::count_snapshots_by_provider() {
  return read([&](sqlite::Connection& connection) {
    return count_by_provider(connection,
                             "SELECT provider, COUNT(*) FROM snapshots GROUP BY provider");
  });
}

Status StateStore::update_volume_capacity(std::string_view id, int64_t capacity_bytes) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(run(prepare(
        connection, "UPDATE volumes SET capacity_bytes = ?2 WHERE id = ?1", id, capacity_bytes)));
    if (connection.changes() == 0) return error(Code::kNotFound, "volume \"{}\" not found", id);
    return Status::ok();
  });
}

Status StateStore::update_volume_mutable_parameters(std::string_view id,
                                                    const StringMap& mutable_parameters) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection, "UPDATE volumes SET mutable_parameters = ?2 WHERE id = ?1", id,
                    to_json(mutable_parameters))));
    if (connection.changes() == 0) return error(Code::kNotFound, "volume \"{}\" not found", id);
    return Status::ok();
  });
}

Status StateStore::delete_volume(std::string_view id) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::vector<std::string>> users = state_sql::volume_users(connection, id);
    if (!users) return users.status();
    if (!users->empty()) {
      return error(Code::kFailedPrecondition,
                   "volume \"{}\" is still {}; unpublish and unstage it before deleting", id,
                   fmt::join(*users, ", "));
    }
    return run(prepare(connection, "DELETE FROM volumes WHERE id = ?1", id));
  });
}

}  // namespace rosetctl
