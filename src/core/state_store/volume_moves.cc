// Volume moves (StateStore: pause_volume_move ... find_volume_move): the source node's record
// of a volume on its way to another node (daemon/volume_moves.h says what each state refuses).
#include <fmt/ranges.h>

#include "core/state_store.h"
#include "core/state_store/queries.h"

namespace rosetctl {
namespace {

Expected<VolumeMove> read_move(const sqlite::Statement& row) {
  VolumeMove move;
  move.volume_id = row.column_text(0);
  move.to_node = row.column_text(1);
  move.moved = row.column_text(2) == "moved";
  move.new_volume_id = row.column_text(3);
  return move;
}

Expected<std::optional<VolumeMove>> move_of(sqlite::Connection& connection,
                                            std::string_view volume_id) {
  return select_one(prepare(connection,
                            "SELECT volume_id, to_node, state, new_volume_id FROM volume_moves "
                            "WHERE volume_id = ?1",
                            volume_id),
                    read_move);
}

}  // namespace

Expected<std::optional<VolumeMove>> state_sql::volume_move_row(sqlite::Connection& connection,
                                                               std::string_view volume_id) {
  return move_of(connection, volume_id);
}

Status StateStore::pause_volume_move(std::string_view volume_id, std::string_view to_node) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::optional<std::string>> name = select_one<std::string>(
        prepare(connection, "SELECT name FROM volumes WHERE id = ?1", volume_id), read_text);
    if (!name) return name.status();
    if (!*name) return error(Code::kNotFound, "volume \"{}\" does not exist", volume_id);
    Expected<std::optional<VolumeMove>> move = move_of(connection, volume_id);
    if (!move) return move.status();
    if (*move && (*move)->moved) {
      return error(Code::kFailedPrecondition, "volume \"{}\" has moved to node \"{}\" as {}",
                   volume_id, (*move)->to_node, (*move)->new_volume_id);
    }
    if (*move && (*move)->to_node != to_node) {
      return error(Code::kFailedPrecondition, "volume \"{}\" is being moved to node \"{}\"",
                   volume_id, (*move)->to_node);
    }
    // Checked in the transaction that pauses: a publication recorded before is seen here, and
    // one after it sees the pause (refuse_moving_volume).
    Expected<std::vector<std::string>> users = state_sql::volume_users(connection, volume_id);
    if (!users) return users.status();
    if (!users->empty()) {
      return error(Code::kFailedPrecondition, "volume \"{}\" is in use: it is still {}", volume_id,
                   fmt::join(*users, ", "));
    }
    if (*move) return Status::ok();
    return run(prepare(connection,
                       "INSERT INTO volume_moves (volume_id, to_node, state, new_volume_id) "
                       "VALUES (?1, ?2, 'paused', '')",
                       volume_id, to_node));
  });
}

Status StateStore::finish_volume_move(std::string_view volume_id, std::string_view to_node,
                                      std::string_view new_volume_id) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::optional<VolumeMove>> move = move_of(connection, volume_id);
    if (!move) return move.status();
    if (!*move || (*move)->to_node != to_node) {
      return error(Code::kFailedPrecondition,
                   "volume \"{}\" is not paused for a move to node \"{}\"", volume_id, to_node);
    }
    if ((*move)->moved) {
      if ((*move)->new_volume_id == new_volume_id) return Status::ok();
      return error(Code::kFailedPrecondition, "volume \"{}\" has moved to node \"{}\" as {}",
                   volume_id, (*move)->to_node, (*move)->new_volume_id);
    }
    return run(prepare(connection,
                       "UPDATE volume_moves SET state = 'moved', new_volume_id = ?2 "
                       "WHERE volume_id = ?1",
                       volume_id, new_volume_id));
  });
}

Status StateStore::cancel_volume_move(std::string_view volume_id) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::optional<VolumeMove>> move = move_of(connection, volume_id);
    if (!move) return move.status();
    if (!*move) return Status::ok();
    if ((*move)->moved) {
      return error(Code::kFailedPrecondition,
                   "volume \"{}\" has moved to node \"{}\" as {}: that cannot be undone here",
                   volume_id, (*move)->to_node, (*move)->new_volume_id);
    }
    return run(prepare(connection, "DELETE FROM volume_moves WHERE volume_id = ?1", volume_id));
  });
}

Expected<std::optional<VolumeMove>> StateStore::find_volume_move(std::string_view volume_id) {
  return read([&](sqlite::Connection& connection) { return move_of(connection, volume_id); });
}

}  // namespace rosetctl
