// A thin RAII layer over SQLite: connections, prepared statements and transaction guards, with
// SQLite result codes turned into Status values. <sqlite3.h> stays inside sqlite.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace rosetctl::sqlite {

// How long a connection waits for another writer (thread or process) before giving up with
// ABORTED "state store busy: ...".
inline constexpr std::chrono::milliseconds kDefaultBusyTimeout{10'000};

// A prepared statement. Parameters are 1-based (?1, ?2, ...) and columns 0-based, as in SQLite.
// It must not outlive the Connection that prepared it.
class Statement {
 public:
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;

  // A failed bind is remembered and reported by the next step()/run(), so binds can be chained:
  // `stmt.bind_text(1, id).bind_int64(2, size).run()`.
  Statement& bind_text(int index, std::string_view value);
  Statement& bind_int64(int index, int64_t value);
  Statement& bind_bool(int index, bool value) { return bind_int64(index, value ? 1 : 0); }
  Statement& bind_null(int index);

  // true: a row is ready for the column_* accessors; false: the statement is done.
  Expected<bool> step();
  // Steps until done, discarding rows: for INSERT/UPDATE/DELETE and DDL.
  Status run();
  // Makes the statement ready to run again; bindings are kept.
  void reset();

  std::string column_text(int index) const;  // "" for NULL
  int64_t column_int64(int index) const;
  bool column_bool(int index) const { return column_int64(index) != 0; }
  bool column_is_null(int index) const;

 private:
  friend class Connection;
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const;
  };
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement& check_bind(int rc);

  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
  Status bind_status_;  // first failed bind since construction
};

// An open database handle. A connection is used by one thread at a time (the state store lends
// each one out from a pool); it may be moved, not copied.
class Connection {
 public:
  // Opens (creating if missing) the database at `path` and applies what every connection needs:
  // WAL journal, synchronous=FULL, foreign keys on, extended result codes, the busy timeout.
  static Expected<Connection> open(const std::string& path,
                                   std::chrono::milliseconds busy_timeout = kDefaultBusyTimeout);

  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;

  // Runs one or more `;`-separated statements that return no rows we need.
  Status exec(std::string_view sql);
  Expected<Statement> prepare(std::string_view sql);

  // Rows inserted, updated or deleted by the most recent statement.
  int64_t changes() const;
  // False in autocommit mode, true between BEGIN and COMMIT/ROLLBACK.
  bool in_transaction() const;
  // The file this connection has open.
  std::string path() const;

 private:
  struct Closer {
    void operator()(sqlite3* db) const;
  };
  explicit Connection(sqlite3* db) : db_(db) {}

  std::unique_ptr<sqlite3, Closer> db_;
};

// `BEGIN IMMEDIATE` now (taking the write lock up front, so a transaction never fails halfway with
// a lock upgrade conflict); ROLLBACK in the destructor unless commit() succeeded.
class Transaction {
 public:
  static Expected<Transaction> begin(Connection& connection);

  Transaction(Transaction&& other) noexcept : connection_(other.connection_) {
    other.connection_ = nullptr;
  }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();

  Status commit();

 private:
  explicit Transaction(Connection* connection) : connection_(connection) {}

  Connection* connection_;  // null once committed or moved from
};

}  // namespace rosetctl::sqlite
