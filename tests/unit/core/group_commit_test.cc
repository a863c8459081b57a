// Tests for src/core/group_commit.cc: concurrent writers share transactions, each write stays
// atomic on its own.
#include "core/group_commit.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

namespace {

struct TempDatabase {
  std::string dir;
  std::string path;
  TempDatabase() {
    char pattern[] = "/tmp/rosetctl-group-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    dir = pattern;
    path = dir + "/test.db";
    auto connection = rosetctl::sqlite::Connection::open(path);
    REQUIRE(connection.has_value());
    REQUIRE(connection->exec("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)").is_ok());
  }
  ~TempDatabase() { std::filesystem::remove_all(dir); }

  int64_t count() {
    auto connection = rosetctl::sqlite::Connection::open(path);
    REQUIRE(connection.has_value());
    auto statement = connection->prepare("SELECT count(*) FROM t");
    REQUIRE(statement.has_value());
    REQUIRE(*statement->step());
    return statement->column_int64(0);
  }
};

rosetctl::Status insert(rosetctl::sqlite::Connection& connection, const std::string& key) {
  auto statement = connection.prepare("INSERT INTO t (k, v) VALUES (?, 1)");
  if (!statement) return statement.status();
  statement->bind_text(1, key);
  return statement->run();
}

}  // namespace

TEST_CASE("concurrent writes from many threads all commit", "[group_commit]") {
  TempDatabase db;
  rosetctl::GroupCommit group(db.path);
  std::vector<std::thread> threads;
  std::atomic<int> failures = 0;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        auto status = group.run([&](rosetctl::sqlite::Connection& connection) {
          return insert(connection, std::to_string(t) + ":" + std::to_string(i));
        });
        if (!status.is_ok()) ++failures;
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  CHECK(failures == 0);
  CHECK(db.count() == 800);
}

TEST_CASE("a failing write is rolled back alone while its batch commits", "[group_commit]") {
  TempDatabase db;
  rosetctl::GroupCommit group(db.path);
  REQUIRE(group.run([](auto& connection) { return insert(connection, "taken"); }).is_ok());

  std::vector<std::thread> threads;
  std::atomic<int> duplicates = 0, successes = 0;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        // Every other write inserts a row and then hits a duplicate: its first row must vanish.
        bool fail = (i % 2) == 0;
        auto status = group.run([&](rosetctl::sqlite::Connection& connection) -> rosetctl::Status {
          ROSETCTL_RETURN_IF_ERROR(insert(connection, std::to_string(t) + ":" + std::to_string(i)));
          return fail ? insert(connection, "taken") : rosetctl::Status::ok();
        });
        if (fail) {
          if (status.code() == rosetctl::Code::kAlreadyExists) ++duplicates;
        } else if (status.is_ok()) {
          ++successes;
        }
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  CHECK(duplicates == 200);
  CHECK(successes == 200);
  CHECK(db.count() == 201);
}

TEST_CASE("a writer with a small auto-checkpoint keeps the WAL short and loses nothing",
          "[group_commit]") {
  // 100 transactions of about one page each, with SQLite's default and with 10 pages.
  auto wal_bytes = [](TempDatabase& db, int autocheckpoint_pages) {
    rosetctl::GroupCommit group(db.path, autocheckpoint_pages);
    for (int i = 0; i < 100; ++i) {
      std::string key = std::to_string(i) + std::string(3000, 'k');
      REQUIRE(group.run([&](rosetctl::sqlite::Connection& c) { return insert(c, key); }).is_ok());
    }
    return std::filesystem::file_size(db.path + "-wal");
  };
  TempDatabase default_db, short_db;
  auto long_wal = wal_bytes(default_db, 0);
  auto short_wal = wal_bytes(short_db, 10);
  CHECK(short_wal < 25 * 4096);
  CHECK(long_wal > 4 * short_wal);
  CHECK(default_db.count() == 100);
  CHECK(short_db.count() == 100);
}
