// Registered node records (rosetctl.v1.Registry): registering, listing and removing nodes.
#include <fmt/ranges.h>

#include <algorithm>

#include "core/state_store.h"
#include "core/state_store/queries.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr const char* kNodeColumns =
    "node_id, address, iscsi_initiator, topology, version, registered_at_ns, last_seen_ns, "
    "cordoned_at_ns";

Expected<NodeRecord> read_node(const sqlite::Statement& row) {
  NodeRecord node;
  node.node_id = row.column_text(0);
  node.address = row.column_text(1);
  node.iscsi_initiator = row.column_text(2);
  Expected<StringMap> topology = from_json(row.column_text(3), "nodes.topology");
  if (!topology) return topology.status();
  node.topology = std::move(*topology);
  node.version = row.column_text(4);
  node.registered_at_ns = row.column_int64(5);
  node.last_seen_ns = row.column_int64(6);
  node.cordoned_at_ns = row.column_int64(7);
  return node;
}

// Another node holding `initiator`, compared without case: iSCSI names are case-insensitive
// and rows written before names were normalised at registration may hold capitals.
Expected<std::optional<std::string>> other_node_with_initiator(sqlite::Connection& connection,
                                                               std::string_view initiator,
                                                               std::string_view node_id) {
  return select_one<std::string>(
      prepare(connection,
              "SELECT node_id FROM nodes WHERE iscsi_initiator != '' AND "
              "lower(iscsi_initiator) = lower(?1) AND node_id != ?2 ORDER BY node_id LIMIT 1",
              initiator, node_id),
      read_text);
}

}  // namespace

Expected<NodeRecord> StateStore::upsert_node(const NodeRecord& node) {
  NodeRecord stored = node;
  Status status = write([&](sqlite::Connection& connection) -> Status {
    if (!node.iscsi_initiator.empty()) {
      // In the transaction that writes, so two nodes never come to share one name.
      auto holder = other_node_with_initiator(connection, node.iscsi_initiator, node.node_id);
      if (!holder) return holder.status();
      if (holder->has_value()) {
        return error(Code::kAlreadyExists, "iscsi_initiator {} is node \"{}\"'s",
                     display_quoted(node.iscsi_initiator, 223), **holder);
      }
    }
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection,
                    fmt::format("INSERT INTO nodes ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0) ON "
                                "CONFLICT (node_id) DO UPDATE SET address = ?2, iscsi_initiator = "
                                "?3, topology = ?4, version = ?5, last_seen_ns = ?7",
                                kNodeColumns),
                    node.node_id, node.address, node.iscsi_initiator, to_json(node.topology),
                    node.version, node.registered_at_ns, node.last_seen_ns)));
    // What the first registration set, and the cordon, which no registration changes.
    Expected<std::optional<NodeRecord>> row = select_one(
        prepare(connection, fmt::format("SELECT {} FROM nodes WHERE node_id = ?1", kNodeColumns),
                node.node_id),
        read_node);
    if (!row) return row.status();
    if (row->has_value()) {
      stored.registered_at_ns = (*row)->registered_at_ns;
      stored.cordoned_at_ns = (*row)->cordoned_at_ns;
    }
    return Status::ok();
  });
  if (!status) return status;
  return stored;
}

Expected<std::optional<std::string>> StateStore::node_with_initiator(std::string_view initiator,
                                                                     std::string_view except) {
  return read([&](sqlite::Connection& connection) {
    return other_node_with_initiator(connection, initiator, except);
  });
}

Expected<std::optional<NodeRecord>> StateStore::find_node(std::string_view node_id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection, fmt::format("SELECT {} FROM nodes WHERE node_id = ?1", kNodeColumns),
                node_id),
        read_node);
  });
}

Expected<std::vector<NodeRecord>> StateStore::list_nodes() {
  return read([&](sqlite::Connection& connection) {
    return select_all(
        prepare(connection, fmt::format("SELECT {} FROM nodes ORDER BY node_id", kNodeColumns)),
        read_node);
  });
}

Expected<NodeRemoval> StateStore::delete_node(std::string_view node_id, bool force) {
  NodeRemoval removal;
  Status status = write([&](sqlite::Connection& connection) -> Status {
    // Checked in the transaction that deletes, so no publication slips in between.
    Expected<std::vector<std::string>> published = select_all<std::string>(
        prepare(connection,
                "SELECT volume_id FROM controller_publications WHERE node_id = ?1 ORDER BY "
                "volume_id",
                node_id),
        read_text);
    if (!published) return published.status();
    Expected<std::optional<std::string>> registered = select_one<std::string>(
        prepare(connection, "SELECT node_id FROM nodes WHERE node_id = ?1", node_id), read_text);
    if (!registered) return registered.status();
    // Removing what is not there is done already, whatever is still published to it.
    if (registered->has_value() && !published->empty() && !force) {
      Expected<std::vector<std::string>> names = select_all<std::string>(
          prepare(connection,
                  "SELECT '\"' || v.name || '\"' FROM controller_publications p JOIN volumes v "
                  "ON v.id = p.volume_id WHERE p.node_id = ?1 ORDER BY v.name",
                  node_id),
          read_text);
      if (!names) return names.status();
      constexpr std::size_t kNamed = 10;
      std::string more = names->size() > kNamed
                             ? fmt::format(" and {} more", names->size() - kNamed)
                             : std::string();
      names->resize(std::min(names->size(), kNamed));
      return error(Code::kFailedPrecondition, "node \"{}\" still has volumes published to it: {}{}",
                   node_id, fmt::join(*names, ", "), more);
    }
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection, "DELETE FROM nodes WHERE node_id = ?1", node_id)));
    removal.removed = connection.changes() > 0;
    removal.published_volume_ids = std::move(*published);
    return Status::ok();
  });
  if (!status) return status;
  return removal;
}

Expected<std::optional<NodeRecord>> StateStore::set_node_cordoned(std::string_view node_id,
                                                                  int64_t now_ns) {
  std::optional<NodeRecord> stored;
  Status status = write([&](sqlite::Connection& connection) -> Status {
    // Cordoning again keeps the first time: "since when" is what an operator asks.
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection,
                    "UPDATE nodes SET cordoned_at_ns = CASE WHEN ?2 = 0 THEN 0 WHEN "
                    "cordoned_at_ns != 0 THEN cordoned_at_ns ELSE ?2 END WHERE node_id = ?1",
                    node_id, now_ns)));
    Expected<std::optional<NodeRecord>> row = select_one(
        prepare(connection, fmt::format("SELECT {} FROM nodes WHERE node_id = ?1", kNodeColumns),
                node_id),
        read_node);
    if (!row) return row.status();
    stored = std::move(*row);
    return Status::ok();
  });
  if (!status) return status;
  return stored;
}

}  // namespace rosetctl
