// Tests for src/core/group_commit.cc: concurrent writers share transactions, each write stays
// atomic on its own.
#include "core/group_commit.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "unit/scratch_dir.h"

namespace {

struct TempDatabase {
  rosetctl::testing::ScratchDir dir{"group"};
  std::string path = dir / "test.db";
  TempDatabase() {
    auto connection = rosetctl::sqlite::Connection::open(path);
    REQUIRE(connection.has_value());
    REQUIRE(connection->exec("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)").is_ok());
  }
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

// SQLite's `synchronous` for this connection: 1 (NORMAL) commits without syncing the WAL, 2
// (FULL) syncs it.
int64_t synchronous_setting(rosetctl::sqlite::Connection& connection) {
  auto statement = connection.prepare("PRAGMA synchronous");
  REQUIRE(statement.has_value());
  auto row = statement->step();
  REQUIRE(row.has_value());
  REQUIRE(*row);
  return statement->column_int64(0);
}

constexpr int64_t kNormal = 1;
constexpr int64_t kFull = 2;

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

TEST_CASE("a batch is synced to disk when any of its writes asks for it", "[group_commit]") {
  using rosetctl::Durability;
  TempDatabase db;
  rosetctl::GroupCommit group(db.path);
  // Each write notes the setting its transaction commits under.
  auto write = [&](const std::string& key, Durability durability, int64_t& seen) {
    return group.run(
        [&](rosetctl::sqlite::Connection& connection) {
          seen = synchronous_setting(connection);
          return insert(connection, key);
        },
        durability);
  };
  int64_t seen = 0;
  REQUIRE(write("lazy-1", Durability::kUntilReboot, seen).is_ok());
  CHECK(seen == kNormal);
  REQUIRE(write("disk-1", Durability::kDisk, seen).is_ok());
  CHECK(seen == kFull);
  REQUIRE(write("lazy-2", Durability::kUntilReboot, seen).is_ok());
  CHECK(seen == kNormal);
  REQUIRE(group.run([](auto& connection) { return insert(connection, "default"); }).is_ok());

  // A lazy and a durable write held back by a batch in progress share the next one.
  std::atomic<bool> entered = false, release = false;
  int64_t first_seen = 0, lazy_seen = 0, disk_seen = 0;
  std::thread first([&] {
    CHECK(group
              .run(
                  [&](rosetctl::sqlite::Connection& connection) {
                    first_seen = synchronous_setting(connection);
                    entered = true;
                    while (!release)
                      std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    return insert(connection, "first");
                  },
                  Durability::kUntilReboot)
              .is_ok());
  });
  while (!entered)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread lazy([&] { CHECK(write("lazy-3", Durability::kUntilReboot, lazy_seen).is_ok()); });
  std::thread disk([&] { CHECK(write("disk-2", Durability::kDisk, disk_seen).is_ok()); });
  while (group.queued_writes() < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  release = true;
  for (std::thread* thread : {&first, &lazy, &disk})
    thread->join();
  CHECK(first_seen == kNormal);
  CHECK(lazy_seen == kFull);
  CHECK(disk_seen == kFull);
  CHECK(db.count() == 7);  // every write is visible to another connection
}

namespace {

// Whether the stack where a returned run() kept its Pending stays untouched for a moment: a
// post that lands after its writer returned writes there (sem_post's count). Zeroed, then
// looked at again after the other writers had a chance to run.
__attribute__((noinline)) bool stack_left_alone() {
  volatile unsigned char below[4096];
  for (auto& byte : below)
    byte = 0;
  std::this_thread::yield();
  for (auto& byte : below) {
    if (byte != 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("no writer is woken after its write returned", "[group_commit]") {
  // A writer woken to lead, whose write a newer leader had taken meanwhile, once returned before
  // that leader posted it for being done: the post then hit a gone semaphore (serve aborted with
  // "The futex facility returned an unexpected error code" in a 500-target publish fan-out).
  TempDatabase db;
  rosetctl::GroupCommit group(db.path);
  std::vector<std::thread> threads;
  std::atomic<int> failures = 0;
  std::atomic<int> touched = 0;
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        auto status = group.run([](rosetctl::sqlite::Connection&) { return rosetctl::Status(); },
                                rosetctl::Durability::kUntilReboot);
        if (!status.is_ok()) ++failures;
        if (!stack_left_alone()) ++touched;
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  CHECK(failures == 0);
  CHECK(touched == 0);
}
