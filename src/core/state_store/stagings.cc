// Staging records: the volumes NodeStageVolume staged on this node.
#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {
namespace {

constexpr const char* kStagingColumns =
    "volume_id, staging_path, capability, created_dir, mount_id, mount_ns, mount_fingerprint";

Expected<Staging> read_staging(const sqlite::Statement& row) {
  return Staging{row.column_text(0), row.column_text(1), row.column_text(2), row.column_bool(3),
                 read_recorded_mount(row, 4)};
}

}  // namespace

Status StateStore::upsert_staging(const Staging& staging) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       fmt::format("INSERT INTO stagings ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                                   "ON CONFLICT (volume_id, staging_path) DO UPDATE SET "
                                   "capability = ?3, created_dir = ?4, mount_id = ?5, mount_ns = "
                                   "?6, mount_fingerprint = ?7",
                                   kStagingColumns),
                       staging.volume_id, staging.staging_path, staging.capability,
                       staging.created_dir, static_cast<int64_t>(staging.mount.id),
                       static_cast<int64_t>(staging.mount.mount_ns),
                       staging.mount.fingerprint.to_text()));
  });
}

Status StateStore::set_staging_mount(std::string_view volume_id, std::string_view staging_path,
                                     const RecordedMount& mount) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       "UPDATE stagings SET mount_id = ?3, mount_ns = ?4, mount_fingerprint = ?5 "
                       "WHERE volume_id = ?1 AND staging_path = ?2",
                       volume_id, staging_path, static_cast<int64_t>(mount.id),
                       static_cast<int64_t>(mount.mount_ns), mount.fingerprint.to_text()));
  });
}

Expected<std::optional<Staging>> state_sql::staging_row(sqlite::Connection& connection,
                                                        std::string_view volume_id,
                                                        std::string_view staging_path) {
  return select_one(
      prepare(connection,
              fmt::format("SELECT {} FROM stagings WHERE volume_id = ?1 AND staging_path = ?2",
                          kStagingColumns),
              volume_id, staging_path),
      read_staging);
}

Expected<std::optional<Staging>> StateStore::find_staging(std::string_view volume_id,
                                                          std::string_view staging_path) {
  return read([&](sqlite::Connection& connection) {
    return state_sql::staging_row(connection, volume_id, staging_path);
  });
}

Expected<std::vector<Staging>> StateStore::stagings(std::string_view volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM stagings WHERE volume_id = ?1 ORDER BY "
                                          "staging_path",
                                          kStagingColumns),
                              volume_id),
                      read_staging);
  });
}

Expected<std::vector<Staging>> StateStore::all_stagings() {
  return read([&](sqlite::Connection& connection) {
    return select_all(
        prepare(connection, fmt::format("SELECT {} FROM stagings ORDER BY volume_id, staging_path",
                                        kStagingColumns)),
        read_staging);
  });
}

Status StateStore::delete_staging(std::string_view volume_id, std::string_view staging_path) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       "DELETE FROM stagings WHERE volume_id = ?1 AND staging_path = ?2", volume_id,
                       staging_path));
  });
}

}  // namespace rosetctl
