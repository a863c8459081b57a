// Tests for the snapshot records of src/core/state_store.cc (schema version 2).
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/sqlite.h"
#include "core/state_store.h"

using namespace rosetctl;

namespace {

struct StoreDir {
  std::string path;
  StoreDir() {
    char pattern[] = "/tmp/rosetctl-snaprec-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
  }
  ~StoreDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

std::unique_ptr<StateStore> open_store(const std::string& dir) {
  auto store = StateStore::open(dir);
  REQUIRE(store.has_value());
  return std::move(*store);
}

SnapshotRecord make_snapshot(const std::string& id, const std::string& name,
                             const std::string& volume, int64_t created) {
  return SnapshotRecord{id,          name,         "local", volume, "vol-name", "",
                        "a message", {{"k", "v"}}, 100,     2,      50,         created};
}

}  // namespace

TEST_CASE("snapshots: insert, find by id and name, refuse duplicates", "[state_store]") {
  StoreDir dir;
  auto store = open_store(dir.path);
  SnapshotRecord snapshot = make_snapshot(std::string(64, 'a'), "first", "local-1", 10);
  REQUIRE(store->insert_snapshot(snapshot).is_ok());
  CHECK(store->find_snapshot(snapshot.id)->value() == snapshot);
  CHECK(store->find_snapshot_by_name("first")->value() == snapshot);
  CHECK_FALSE(store->find_snapshot("missing")->has_value());

  Status same_id = store->insert_snapshot(make_snapshot(snapshot.id, "other", "local-1", 11));
  CHECK(same_id.code() == Code::kAlreadyExists);
  Status same_name =
      store->insert_snapshot(make_snapshot(std::string(64, 'b'), "first", "local-1", 11));
  CHECK(same_name.code() == Code::kAlreadyExists);
  CHECK(same_name.message().find("first") != std::string::npos);
}

TEST_CASE("snapshots: paging, filtering by volume, latest of a volume, delete", "[state_store]") {
  StoreDir dir;
  auto store = open_store(dir.path);
  for (int i = 0; i < 5; ++i) {
    std::string id(64, static_cast<char>('a' + i));
    REQUIRE(store
                ->insert_snapshot(make_snapshot(id, "s" + std::to_string(i),
                                                i % 2 == 0 ? "local-even" : "local-odd", 100 - i))
                .is_ok());
  }
  auto page = store->list_snapshots("", 2);
  REQUIRE(page->size() == 2);
  auto rest = store->list_snapshots(page->back().id, 0);
  CHECK(rest->size() == 3);
  CHECK(store->list_snapshots("", 0, "local-even")->size() == 3);
  CHECK(store->list_snapshots("", 0, "local-none")->empty());
  // Latest by time, not by id: s0 has the largest created_at_ns.
  CHECK(store->latest_snapshot_of("local-even")->value().name == "s0");
  CHECK_FALSE(store->latest_snapshot_of("local-none")->has_value());

  REQUIRE(store->delete_snapshot(std::string(64, 'a')).is_ok());
  REQUIRE(store->delete_snapshot(std::string(64, 'a')).is_ok());  // idempotent
  CHECK(store->latest_snapshot_of("local-even")->value().name == "s2");
}

TEST_CASE("snapshots: a version 1 database migrates and keeps its volumes", "[state_store]") {
  StoreDir dir;
  {
    auto store = open_store(dir.path);
    VolumeRecord volume{"local-1", "kept", "local", 0, {}, {}, "mount", "", 1};
    REQUIRE(store->insert_volume(volume).is_ok());
  }
  {
    // Turn it back into what rosetctl with schema 1 wrote.
    auto connection = sqlite::Connection::open(dir.path + "/state.db");
    REQUIRE(connection.has_value());
    REQUIRE(connection->exec("DROP TABLE snapshots; PRAGMA user_version = 1").is_ok());
  }
  auto store = open_store(dir.path);
  CHECK(store->find_volume("local-1")->has_value());
  CHECK(store->insert_snapshot(make_snapshot(std::string(64, 'c'), "new", "local-1", 1)).is_ok());
}
