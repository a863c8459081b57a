// A thin RAII layer over SQLite: connections, prepared statements and transaction guards, with
// SQLite result codes turned into Status values. <sqlite3.h> stays inside sqlite.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace rosetctl::sqlite {

// Prepared statements a connection keeps between uses: compiling SQL costs more than running
// the small statements of the state store. Owned by one Connection (used by one thread at a time).
class StatementCache {
 public:
  StatementCache() = default;
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;
  ~StatementCache();

  sqlite3_stmt* take(std::string_view sql);
  // Keeps `stmt` for the next prepare of `sql` (reset, bindings cleared), or finalizes it when
  // one is kept already.
  void give_back(std::string sql, sqlite3_stmt* stmt);

 private:
  std::unordered_map<std::string, sqlite3_stmt*> idle_;
};

// How long a connection waits for another writer (thread or process) before giving up with
// ABORTED "state store busy: ...".
inline constexpr std::chrono::milliseconds kDefaultBusyTimeout{10'000};

// A prepared statement. Parameters are 1-based (?1, ?2, ...) and columns 0-based, as in SQLite.
// It must not outlive the Connection that prepared it.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  // Returns the compiled statement to its connection's cache (or finalizes it).
  ~Statement();

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
  Statement(sqlite3* db, sqlite3_stmt* stmt, StatementCache* cache, std::string sql)
      : db_(db), stmt_(stmt), cache_(cache), sql_(std::move(sql)) {}
  Statement& check_bind(int rc);
  void release();

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  StatementCache* cache_ = nullptr;  // where the statement goes back to; null: finalize it
  std::string sql_;
  Status bind_status_;  // first failed bind since construction
};

class Connection {
 public:
  // Opens (creating if missing) the database at `path` and applies what every connection needs:
  // WAL journal, synchronous=FULL, foreign keys on, extended result codes, the busy timeout.
  static Expected<Connection> open(const std::string& path,
                                   std::chrono::milliseconds busy_timeout = kDefaultBusyTimeout);

  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;

  // Runs one or more `;`-separated statements that return no rows we need (compiled each time:
  // for set-up and rare statements).
  Status exec(std::string_view sql);
  // One statement, compiled once per connection and reused.
  Expected<Statement> prepare(std::string_view sql);
  // prepare(sql) and run it: for the frequent statements without rows (BEGIN, COMMIT, ...).
  Status run(std::string_view sql);

  // PRAGMA quick_check: every page of every table and index read and its structure checked
  // (O(size of the database)). DATA_LOSS naming the file when anything is damaged.
  Status check_integrity();

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
  explicit Connection(sqlite3* db) : db_(db), cache_(std::make_unique<StatementCache>()) {}

  std::unique_ptr<sqlite3, Closer> db_;
  // Declared after db_: cached statements are finalized before the connection closes.
  std::unique_ptr<StatementCache> cache_;
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
