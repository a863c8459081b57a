// Tests for src/core/sqlite.cc: connection settings, statements, error mapping, transactions.
#include "core/sqlite.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>

#include "unit/scratch_dir.h"

namespace rosetctl::sqlite {
namespace {

using TempDir = testing::ScratchDir;

Connection open_ok(const std::string& path,
                   std::chrono::milliseconds busy_timeout = kDefaultBusyTimeout) {
  Expected<Connection> connection = Connection::open(path, busy_timeout);
  INFO(connection.status().message());
  REQUIRE(connection.has_value());
  return std::move(*connection);
}

std::string query_text(Connection& connection, const std::string& sql) {
  Expected<Statement> statement = connection.prepare(sql);
  REQUIRE(statement.has_value());
  Expected<bool> row = statement->step();
  REQUIRE(row.has_value());
  REQUIRE(*row);
  return statement->column_text(0);
}

int64_t count_rows(Connection& connection) {
  return std::stoll(query_text(connection, "SELECT COUNT(*) FROM t"));
}

}  // namespace

TEST_CASE("sqlite: a connection uses WAL, full sync and foreign keys", "[sqlite]") {
  TempDir dir;
  Connection connection = open_ok(dir / "db");
  CHECK(query_text(connection, "PRAGMA journal_mode") == "wal");
  CHECK(query_text(connection, "PRAGMA synchronous") == "2");  // FULL
  CHECK(query_text(connection, "PRAGMA foreign_keys") == "1");
  CHECK(connection.path() == std::filesystem::weakly_canonical(dir / "db").string());
}

TEST_CASE("sqlite: statements bind and read back values", "[sqlite]") {
  TempDir dir;
  Connection connection = open_ok(dir / "db");
  REQUIRE(connection.exec("CREATE TABLE t (s TEXT, i INTEGER, b INTEGER, n TEXT)").is_ok());

  const std::string with_nul("a\0b", 3);
  Expected<Statement> insert = connection.prepare("INSERT INTO t VALUES (?1, ?2, ?3, ?4)");
  REQUIRE(insert.has_value());
  REQUIRE(insert->bind_text(1, with_nul)
              .bind_int64(2, -(int64_t{1} << 40))
              .bind_bool(3, true)
              .bind_null(4)
              .run()
              .is_ok());
  CHECK(connection.changes() == 1);
  insert->reset();
  REQUIRE(insert->bind_text(1, std::string_view()).run().is_ok());  // empty, not NULL

  Expected<Statement> select = connection.prepare("SELECT s, i, b, n FROM t ORDER BY rowid");
  REQUIRE(select.has_value());
  REQUIRE(*select->step());
  CHECK(select->column_text(0) == with_nul);
  CHECK(select->column_int64(1) == -(int64_t{1} << 40));
  CHECK(select->column_bool(2));
  CHECK(select->column_is_null(3));
  CHECK(select->column_text(3).empty());
  REQUIRE(*select->step());
  CHECK_FALSE(select->column_is_null(0));
  CHECK(select->column_text(0).empty());
  CHECK_FALSE(*select->step());
}

TEST_CASE("sqlite: errors become statuses with SQLite's message", "[sqlite]") {
  TempDir dir;
  Connection connection = open_ok(dir / "db");
  REQUIRE(connection.exec("CREATE TABLE t (k TEXT PRIMARY KEY, u TEXT UNIQUE)").is_ok());

  Expected<Statement> bad = connection.prepare("SELEKT 1");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.status().code() == Code::kInternal);
  CHECK_THAT(bad.status().message(), Catch::Contains("syntax error"));

  CHECK(connection.prepare("SELECT 1; SELECT 2").status().code() == Code::kInternal);

  Expected<Statement> out_of_range = connection.prepare("SELECT ?1");
  REQUIRE(out_of_range.has_value());
  Status status = out_of_range->bind_int64(7, 1).run();
  CHECK(status.code() == Code::kInternal);
  CHECK_THAT(status.message(), Catch::Contains("out of range"));

  REQUIRE(connection.exec("INSERT INTO t VALUES ('a', 'x')").is_ok());
  status = connection.exec("INSERT INTO t VALUES ('a', 'y')");
  CHECK(status.code() == Code::kAlreadyExists);
  status = connection.exec("INSERT INTO t VALUES ('b', 'x')");
  CHECK(status.code() == Code::kAlreadyExists);
  CHECK_THAT(status.message(), Catch::Contains("UNIQUE constraint failed: t.u"));
}

TEST_CASE("sqlite: a transaction rolls back unless committed", "[sqlite]") {
  TempDir dir;
  Connection connection = open_ok(dir / "db");
  REQUIRE(connection.exec("CREATE TABLE t (v INTEGER)").is_ok());
  {
    Expected<Transaction> transaction = Transaction::begin(connection);
    REQUIRE(transaction.has_value());
    CHECK(connection.in_transaction());
    REQUIRE(connection.exec("INSERT INTO t VALUES (1)").is_ok());
  }
  CHECK_FALSE(connection.in_transaction());
  CHECK(count_rows(connection) == 0);
  {
    Expected<Transaction> transaction = Transaction::begin(connection);
    REQUIRE(transaction.has_value());
    REQUIRE(connection.exec("INSERT INTO t VALUES (2)").is_ok());
    REQUIRE(transaction->commit().is_ok());
  }
  Connection other = open_ok(dir / "db");
  CHECK(count_rows(other) == 1);
}

TEST_CASE("sqlite: a writer that waits out the busy timeout is ABORTED", "[sqlite]") {
  TempDir dir;
  Connection holder = open_ok(dir / "db");
  REQUIRE(holder.exec("CREATE TABLE t (v INTEGER)").is_ok());
  Connection waiter = open_ok(dir / "db", std::chrono::milliseconds(50));

  Expected<Transaction> held = Transaction::begin(holder);
  REQUIRE(held.has_value());
  Expected<Transaction> blocked = Transaction::begin(waiter);
  REQUIRE_FALSE(blocked.has_value());
  CHECK(blocked.status().code() == Code::kAborted);
  CHECK_THAT(blocked.status().message(), Catch::StartsWith("state store busy: "));

  // Readers are not blocked by a writer in WAL mode.
  CHECK(count_rows(waiter) == 0);
  REQUIRE(held->commit().is_ok());
  Expected<Transaction> now_free = Transaction::begin(waiter);
  CHECK(now_free.has_value());
}

}  // namespace rosetctl::sqlite
