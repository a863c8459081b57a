// The SQLite RAII layer: opening connections with our settings, statements, transactions, and the
// mapping of SQLite result codes to Status codes.
#include "core/sqlite.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <thread>

namespace rosetctl::sqlite {
namespace {

std::string database_name(sqlite3* db) {
  const char* file = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  return fmt::format("state database {}", file != nullptr && *file != '\0' ? file : "(unnamed)");
}

// Never repaired or replaced here: the records are the only list of what exists on disk, so a
// state database made anew would forget volumes and snapshots that are still there.
Status damaged(const std::string& where, std::string_view what) {
  return error(Code::kDataLoss,
               "{} is damaged ({}); rosetctl does not use or rebuild a damaged state database: "
               "restore it, with its -wal file, from a backup",
               where, what);
}

// Busy and locked only come back once the busy timeout has run out, so the caller may retry;
// a UNIQUE/PRIMARY KEY violation is the caller's duplicate; a full disk is the operator's to fix;
// a damaged file is refused.
Status sqlite_error(sqlite3* db, int rc) {
  const std::string where = database_name(db);
  const std::string what = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return error(Code::kAborted, "state store busy: {}: {}; retry", where, what);
    case SQLITE_FULL:
      return error(Code::kResourceExhausted, "{}: {}; free space on its filesystem", where, what);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return damaged(where, what);
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return error(Code::kAlreadyExists, "{}: {}", where, what);
      }
      break;
    default:
      break;
  }
  return error(Code::kInternal, "{}: {}", where, what);
}

bool only_whitespace(const char* begin, const char* end) {
  for (const char* p = begin; p < end; ++p) {
    if (std::isspace(static_cast<unsigned char>(*p)) == 0) return false;
  }
  return true;
}

// SQLite answers a journal-mode switch that races another connection's with SQLITE_BUSY at once,
// without calling the busy handler (seen when several processes open a fresh database together),
// so we retry it ourselves until the busy timeout runs out. Once the file is in WAL mode the
// pragma is a no-op.
Expected<std::string> enable_wal(Connection& connection, std::chrono::milliseconds busy_timeout) {
  const auto deadline = std::chrono::steady_clock::now() + busy_timeout;
  std::chrono::milliseconds pause{1};
  for (;;) {
    Expected<Statement> statement = connection.prepare("PRAGMA journal_mode=WAL");
    Expected<bool> row = statement ? statement->step() : Expected<bool>(statement.status());
    if (row) return *row ? statement->column_text(0) : std::string();
    if (row.status().code() != Code::kAborted || std::chrono::steady_clock::now() >= deadline) {
      return row.status();
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace

StatementCache::~StatementCache() {
  for (auto& [sql, stmt] : idle_)
    sqlite3_finalize(stmt);
}

sqlite3_stmt* StatementCache::take(std::string_view sql) {
  auto found = idle_.find(std::string(sql));
  if (found == idle_.end()) return nullptr;
  sqlite3_stmt* stmt = found->second;
  idle_.erase(found);
  return stmt;
}

void StatementCache::give_back(std::string sql, sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (!idle_.emplace(std::move(sql), stmt).second) sqlite3_finalize(stmt);
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      cache_(other.cache_),
      sql_(std::move(other.sql_)),
      bind_status_(std::move(other.bind_status_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    release();
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    cache_ = other.cache_;
    sql_ = std::move(other.sql_);
    bind_status_ = std::move(other.bind_status_);
  }
  return *this;
}

Statement::~Statement() {
  release();
}

void Statement::release() {
  if (stmt_ == nullptr) return;
  if (cache_ != nullptr) {
    cache_->give_back(std::move(sql_), stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
}

Statement& Statement::check_bind(int rc) {
  if (rc != SQLITE_OK && bind_status_.is_ok()) bind_status_ = sqlite_error(db_, rc);
  return *this;
}

Statement& Statement::bind_text(int index, std::string_view value) {
  // An empty string_view may carry a null data pointer, which SQLite would store as NULL.
  const char* data = value.data() != nullptr ? value.data() : "";
  return check_bind(
      sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
}

Statement& Statement::bind_int64(int index, int64_t value) {
  return check_bind(sqlite3_bind_int64(stmt_, index, value));
}

Statement& Statement::bind_null(int index) {
  return check_bind(sqlite3_bind_null(stmt_, index));
}

Expected<bool> Statement::step() {
  if (!bind_status_.is_ok()) return bind_status_;
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status status = sqlite_error(db_, rc);
  sqlite3_reset(stmt_);  // so the statement can run again after a transient failure
  return status;
}

Status Statement::run() {
  for (;;) {
    Expected<bool> row = step();
    if (!row) return row.status();
    if (!*row) return Status::ok();
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
}

std::string Statement::column_text(int index) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
  if (text == nullptr) return {};
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, index)));
}

int64_t Statement::column_int64(int index) const {
  return sqlite3_column_int64(stmt_, index);
}

bool Statement::column_is_null(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

void Connection::Closer::operator()(sqlite3* db) const {
  sqlite3_close_v2(db);
}

Expected<Connection> Connection::open(const std::string& path,
                                      std::chrono::milliseconds busy_timeout) {
  sqlite3* raw = nullptr;
  // NOMUTEX: a connection is only ever used by one thread at a time, so SQLite's own per-call
  // mutex would be pure overhead.
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Connection connection(raw);  // owns the handle even when opening failed
  if (rc != SQLITE_OK) return sqlite_error(raw, rc).with_context(fmt::format("opening {}", path));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, static_cast<int>(busy_timeout.count()));
  // The last connection to close would otherwise checkpoint the WAL into the database file and
  // start the next process on an empty WAL: five fsyncs per CLI run that made nothing more
  // durable (every commit is synced into the WAL already). Checkpoints still happen as the WAL
  // grows (every 1000 pages), and a copy of the state directory needs state.db-wal with it.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);

  Expected<std::string> mode = enable_wal(connection, busy_timeout);
  if (!mode) return mode.status();
  if (*mode != "wal") {
    return error(Code::kFailedPrecondition,
                 "{}: cannot use a WAL journal (got \"{}\"); put the state directory on a local "
                 "filesystem",
                 path, *mode);
  }
  // A small page cache per connection: the state database is small and the kernel caches its
  // file anyway, while SQLite's default (2 MiB per connection, several pooled connections) was
  // most of serve's private memory after a burst of calls.
  ROSETCTL_RETURN_IF_ERROR(
      connection.exec("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-256"));
  return connection;
}

Status Connection::check_integrity() {
  Expected<Statement> statement = prepare("PRAGMA quick_check");
  if (!statement) return statement.status();
  Expected<bool> row = statement->step();
  if (!row) return row.status();
  // One row "ok", or up to 100 rows each naming a problem: the first says enough.
  const std::string verdict = *row ? statement->column_text(0) : "no verdict";
  if (verdict == "ok") return Status::ok();
  return damaged(database_name(db_.get()), verdict);
}

Status Connection::exec(std::string_view sql) {
  const std::string text(sql);  // sqlite3_exec wants a NUL-terminated string
  const int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status::ok() : sqlite_error(db_.get(), rc);
}

Expected<Statement> Connection::prepare(std::string_view sql) {
  if (sqlite3_stmt* cached = cache_->take(sql)) {
    return Statement(db_.get(), cached, cache_.get(), std::string(sql));
  }
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v3(db_.get(), sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &raw, &tail);
  Statement uncached(db_.get(), raw, nullptr, "");  // finalized unless it proves cacheable
  if (rc != SQLITE_OK) return sqlite_error(db_.get(), rc);
  // Both are programming errors: the rest of a multi-statement string would be silently ignored.
  if (raw == nullptr) return error(Code::kInternal, "empty SQL statement");
  if (!only_whitespace(tail, sql.data() + sql.size())) {
    return error(Code::kInternal, "more than one SQL statement in \"{}\"; use exec()", sql);
  }
  uncached.stmt_ = nullptr;
  return Statement(db_.get(), raw, cache_.get(), std::string(sql));
}

Status Connection::run(std::string_view sql) {
  auto statement = prepare(sql);
  if (!statement) return statement.status();
  return statement->run();
}

int64_t Connection::changes() const {
  return sqlite3_changes64(db_.get());
}

bool Connection::in_transaction() const {
  return sqlite3_get_autocommit(db_.get()) == 0;
}

std::string Connection::path() const {
  const char* file = sqlite3_db_filename(db_.get(), "main");
  return file != nullptr ? file : "";
}

Expected<Transaction> Transaction::begin(Connection& connection) {
  ROSETCTL_RETURN_IF_ERROR(connection.run("BEGIN IMMEDIATE"));
  return Transaction(&connection);
}

Transaction::~Transaction() {
  // A failed statement or COMMIT may already have ended the transaction; then there is nothing
  // to undo, and ROLLBACK would only fail.
  if (connection_ != nullptr && connection_->in_transaction()) {
    static_cast<void>(connection_->exec("ROLLBACK"));
  }
}

Status Transaction::commit() {
  if (connection_ == nullptr) return error(Code::kInternal, "transaction already finished");
  ROSETCTL_RETURN_IF_ERROR(connection_->run("COMMIT"));
  connection_ = nullptr;
  return Status::ok();
}

}  // namespace rosetctl::sqlite
