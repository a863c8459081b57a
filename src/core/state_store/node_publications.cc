// Node publication records: the volumes NodePublishVolume published on this node.
#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {
namespace {

constexpr const char* kNodePublicationColumns =
    "volume_id, target_path, staging_path, readonly, capability, created_target, mount_id, "
    "mount_ns, mount_fingerprint, volume_context";

Expected<NodePublication> read_node_publication(const sqlite::Statement& row) {
  Expected<StringMap> context = from_json(row.column_text(9), "node_publications.volume_context");
  if (!context) return context.status();
  return NodePublication{row.column_text(0),          row.column_text(1), row.column_text(2),
                         row.column_bool(3),          row.column_text(4), row.column_bool(5),
                         read_recorded_mount(row, 6), std::move(*context)};
}

}  // namespace

// A node publication records a bind mount, which does not outlive the machine: its record need
// not either. Written without waiting for the disk (Durability::kUntilReboot), it survives a
// crash of the process; after a machine crash the startup reconcile drops records whose mounts
// are gone, and a record the crash took with it had no mount left to describe.

Status StateStore::upsert_node_publication(const NodePublication& publication) {
  return write(
      [&](sqlite::Connection& connection) {
        return run(
            prepare(connection,
                    fmt::format("INSERT INTO node_publications ({}) VALUES (?1, ?2, ?3, ?4, "
                                "?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (target_path) DO UPDATE SET "
                                "volume_id = ?1, staging_path = ?3, readonly = ?4, capability = "
                                "?5, created_target = ?6, mount_id = ?7, mount_ns = ?8, "
                                "mount_fingerprint = ?9, volume_context = ?10",
                                kNodePublicationColumns),
                    publication.volume_id, publication.target_path, publication.staging_path,
                    publication.readonly, publication.capability, publication.created_target,
                    static_cast<int64_t>(publication.mount.id),
                    static_cast<int64_t>(publication.mount.mount_ns),
                    publication.mount.fingerprint.to_text(), to_json(publication.volume_context)));
      },
      Durability::kUntilReboot);
}

Status StateStore::set_node_publication_mount(std::string_view target_path,
                                              const RecordedMount& mount) {
  return write(
      [&](sqlite::Connection& connection) {
        return run(prepare(connection,
                           "UPDATE node_publications SET mount_id = ?2, mount_ns = ?3, "
                           "mount_fingerprint = ?4 WHERE target_path = ?1",
                           target_path, static_cast<int64_t>(mount.id),
                           static_cast<int64_t>(mount.mount_ns), mount.fingerprint.to_text()));
      },
      Durability::kUntilReboot);
}

Expected<std::optional<NodePublication>> state_sql::node_publication_row(
    sqlite::Connection& connection, std::string_view target_path) {
  return select_one(prepare(connection,
                            fmt::format("SELECT {} FROM node_publications WHERE target_path = ?1",
                                        kNodePublicationColumns),
                            target_path),
                    read_node_publication);
}

Expected<std::optional<NodePublication>> StateStore::find_node_publication(
    std::string_view target_path) {
  return read([&](sqlite::Connection& connection) {
    return state_sql::node_publication_row(connection, target_path);
  });
}

Expected<std::vector<NodePublication>> StateStore::node_publications(std::string_view volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM node_publications WHERE volume_id = ?1 "
                                          "ORDER BY target_path",
                                          kNodePublicationColumns),
                              volume_id),
                      read_node_publication);
  });
}

Expected<std::vector<NodePublication>> StateStore::node_publications_of_staging(
    std::string_view volume_id, std::string_view staging_path) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM node_publications WHERE volume_id = ?1 "
                                          "AND staging_path = ?2 ORDER BY target_path",
                                          kNodePublicationColumns),
                              volume_id, staging_path),
                      read_node_publication);
  });
}

Status StateStore::delete_node_publication(std::string_view target_path) {
  return write(
      [&](sqlite::Connection& connection) {
        return run(prepare(connection, "DELETE FROM node_publications WHERE target_path = ?1",
                           target_path));
      },
      Durability::kUntilReboot);
}

}  // namespace rosetctl
