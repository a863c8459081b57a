// Controller publication records: ControllerPublishVolume's, one per volume and node.
#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {
namespace {

constexpr const char* kControllerPublicationColumns =
    "volume_id, node_id, readonly, capability, publish_context";

Expected<ControllerPublication> read_controller_publication(const sqlite::Statement& row) {
  ControllerPublication publication;
  publication.volume_id = row.column_text(0);
  publication.node_id = row.column_text(1);
  publication.readonly = row.column_bool(2);
  publication.capability = row.column_text(3);
  Expected<StringMap> context =
      from_json(row.column_text(4), "controller_publications.publish_context");
  if (!context) return context.status();
  publication.publish_context = std::move(*context);
  return publication;
}

}  // namespace

Status StateStore::upsert_controller_publication(const ControllerPublication& publication) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::optional<std::string>> volume = select_one<std::string>(
        prepare(connection, "SELECT id FROM volumes WHERE id = ?1", publication.volume_id),
        read_text);
    if (!volume) return volume.status();
    if (!*volume) return error(Code::kNotFound, "volume \"{}\" not found", publication.volume_id);
    return run(prepare(connection,
                       fmt::format("INSERT INTO controller_publications ({}) VALUES (?1, ?2, ?3, "
                                   "?4, ?5) ON CONFLICT (volume_id, node_id) DO UPDATE SET "
                                   "readonly = ?3, capability = ?4, publish_context = ?5",
                                   kControllerPublicationColumns),
                       publication.volume_id, publication.node_id, publication.readonly,
                       publication.capability, to_json(publication.publish_context)));
  });
}

Expected<std::optional<ControllerPublication>> StateStore::find_controller_publication(
    std::string_view volume_id, std::string_view node_id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(prepare(connection,
                              fmt::format("SELECT {} FROM controller_publications WHERE "
                                          "volume_id = ?1 AND node_id = ?2",
                                          kControllerPublicationColumns),
                              volume_id, node_id),
                      read_controller_publication);
  });
}

Expected<std::vector<ControllerPublication>> StateStore::controller_publications(
    std::string_view volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM controller_publications WHERE "
                                          "volume_id = ?1 ORDER BY node_id",
                                          kControllerPublicationColumns),
                              volume_id),
                      read_controller_publication);
  });
}

Status StateStore::delete_controller_publication(std::string_view volume_id,
                                                 std::string_view node_id) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       "DELETE FROM controller_publications WHERE volume_id = ?1 AND node_id = ?2",
                       volume_id, node_id));
  });
}

Expected<std::vector<ControllerPublication>> StateStore::controller_publications_on_node(
    std::string_view node_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM controller_publications WHERE "
                                          "node_id = ?1 ORDER BY volume_id",
                                          kControllerPublicationColumns),
                              node_id),
                      read_controller_publication);
  });
}

Expected<int64_t> StateStore::count_controller_publications_on_node(std::string_view node_id) {
  return read([&](sqlite::Connection& connection) -> Expected<int64_t> {
    Expected<std::optional<int64_t>> count = select_one(
        prepare(connection, "SELECT COUNT(*) FROM controller_publications WHERE node_id = ?1",
                node_id),
        read_int64);
    if (!count) return count.status();
    return count->value_or(0);
  });
}

}  // namespace rosetctl
