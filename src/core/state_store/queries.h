// What each record family's file (volumes.cc, snapshots.cc, ...) uses to reach the state
// database: the pooled connection a read borrows, the group commit a write joins, statements
// bound by argument type, and rows read into records. Private to src/core/state_store*.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/recorded_mount.h"
#include "core/sqlite.h"
#include "core/state_store.h"
#include "core/status.h"

namespace rosetctl {

// A borrowed connection; goes back to the pool when the lease ends.
class StateStore::Lease {
 public:
  Lease(StateStore* store, sqlite::Connection connection)
      : store_(store), connection_(std::move(connection)) {}
  Lease(Lease&& other) noexcept
      : store_(std::exchange(other.store_, nullptr)), connection_(std::move(other.connection_)) {}
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (store_ != nullptr) store_->give_back(std::move(connection_));
  }

  sqlite::Connection& connection() { return connection_; }

 private:
  StateStore* store_;  // null once moved from
  sqlite::Connection connection_;
};

template <typename Body>
auto StateStore::read(Body&& body) -> decltype(body(std::declval<sqlite::Connection&>())) {
  Expected<Lease> lease = borrow();
  if (!lease) return lease.status();
  return body(lease->connection());
}

template <typename Body>
Status StateStore::write(Body&& body, Durability durability) {
  return group_commit_.run(GroupCommit::Body(std::forward<Body>(body)), durability);
}

namespace state_sql {

using StringMap = std::map<std::string, std::string>;

template <typename T>
void bind_arg(sqlite::Statement& statement, int index, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    statement.bind_bool(index, value);
  } else if constexpr (std::is_integral_v<T>) {
    statement.bind_int64(index, value);
  } else {
    statement.bind_text(index, std::string_view(value));
  }
}

// Prepares `sql` and binds `args` to ?1, ?2, ... by type.
template <typename... Args>
Expected<sqlite::Statement> prepare(sqlite::Connection& connection, const std::string& sql,
                                    const Args&... args) {
  Expected<sqlite::Statement> statement = connection.prepare(sql);
  if (!statement) return statement;
  int index = 0;
  (bind_arg(*statement, ++index, args), ...);
  return statement;
}

template <typename T>
using RowReader = Expected<T> (*)(const sqlite::Statement&);

template <typename T>
Expected<std::vector<T>> select_all(Expected<sqlite::Statement> statement, RowReader<T> read) {
  if (!statement) return statement.status();
  std::vector<T> rows;
  for (;;) {
    Expected<bool> has_row = statement->step();
    if (!has_row) return has_row.status();
    if (!*has_row) return rows;
    Expected<T> row = read(*statement);
    if (!row) return row.status();
    rows.push_back(std::move(*row));
  }
}

template <typename T>
Expected<std::optional<T>> select_one(Expected<sqlite::Statement> statement, RowReader<T> read) {
  if (!statement) return statement.status();
  Expected<bool> has_row = statement->step();
  if (!has_row) return has_row.status();
  if (!*has_row) return std::optional<T>();
  Expected<T> row = read(*statement);
  if (!row) return row.status();
  return std::optional<T>(std::move(*row));
}
Status run(Expected<sqlite::Statement> statement);

// Invalid UTF-8 is replaced rather than thrown about: CSI strings arrive UTF-8 checked anyway.
std::string to_json(const StringMap& map);
// DATA_LOSS naming `column` when `text` is not a JSON object of strings.
Expected<StringMap> from_json(const std::string& text, std::string_view column);

// The first column as text or as an integer: RowReaders for one-column queries.
Expected<std::string> read_text(const sqlite::Statement& row);
Expected<int64_t> read_int64(const sqlite::Statement& row);
// The three mount columns starting at `first`.
RecordedMount read_recorded_mount(const sqlite::Statement& row, int first);

// Rows of (provider, count), as a map: `sql` selects the two columns.
Expected<std::map<std::string, int64_t>> count_by_provider(sqlite::Connection& connection,
                                                           const char* sql);

// One record by its key, read on a connection the caller holds: several of them between BEGIN
// and COMMIT read one snapshot (StateStore::node_publish_state).
Expected<std::optional<VolumeRecord>> volume_row(sqlite::Connection& connection,
                                                 std::string_view id);
Expected<std::optional<VolumeMove>> volume_move_row(sqlite::Connection& connection,
                                                    std::string_view volume_id);
Expected<std::optional<Staging>> staging_row(sqlite::Connection& connection,
                                             std::string_view volume_id,
                                             std::string_view staging_path);
Expected<std::optional<NodePublication>> node_publication_row(sqlite::Connection& connection,
                                                              std::string_view target_path);

// What still holds a volume, as phrases: `published to node "n1"`, `staged at "/p"`, ...
Expected<std::vector<std::string>> volume_users(sqlite::Connection& connection,
                                                std::string_view id);

}  // namespace state_sql

// The record families' files use these unqualified, as one file did before the split. Only the
// store's own files include this header.
using state_sql::count_by_provider;
using state_sql::from_json;
using state_sql::prepare;
using state_sql::read_int64;
using state_sql::read_recorded_mount;
using state_sql::read_text;
using state_sql::run;
using state_sql::select_all;
using state_sql::select_one;
using state_sql::StringMap;
using state_sql::to_json;

}  // namespace rosetctl
