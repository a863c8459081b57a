// Tests for the snapshot records of src/core/state_store.cc (schema versions 2 to 6); the
// databases of older schemas they make drop what later versions added, the nodes table (8) too.
#include <catch2/catch.hpp>

#include "core/sqlite.h"
#include "core/state_store.h"
#include "unit/core/open_state_store.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;

namespace {

SnapshotRecord make_snapshot(const std::string& id, const std::string& name,
                             const std::string& volume, int64_t created) {
  SnapshotRecord record;
  record.id = id;
  record.name = name;
  record.commit_id = "c-" + id;
  record.provider = "local";
  record.source_volume_id = volume;
  record.source_volume_name = "vol-name";
  record.message = "a message";
  record.parameters = {{"k", "v"}};
  record.size_bytes = 100;
  record.source_capacity_bytes = 1 << 20;
  record.file_count = 2;
  record.new_bytes = 50;
  record.created_at_ns = created;
  record.ready = true;
  return record;
}

}  // namespace

TEST_CASE("snapshots: insert, find by id and name, refuse duplicates", "[state_store]") {
  testing::ScratchDir dir;
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
  testing::ScratchDir dir;
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
  testing::ScratchDir dir;
  {
    auto store = open_store(dir.path);
    VolumeRecord volume{"local-1", "kept", "local", 0, {}, {}, "mount", "", 1};
    REQUIRE(store->insert_volume(volume).is_ok());
  }
  {
    // Turn it back into what rosetctl with schema 1 wrote.
    auto connection = sqlite::Connection::open(dir.path + "/state.db");
    REQUIRE(connection.has_value());
    REQUIRE(
        connection
            ->exec("DROP TABLE snapshots; ALTER TABLE volumes DROP COLUMN mutable_parameters; "
                   "ALTER TABLE stagings DROP COLUMN mount_ns; ALTER TABLE stagings DROP COLUMN "
                   "mount_fingerprint; ALTER TABLE node_publications DROP COLUMN mount_ns; "
                   "ALTER TABLE node_publications DROP COLUMN mount_fingerprint; "
                   "ALTER TABLE node_publications DROP COLUMN volume_context; "
                   "ALTER TABLE stagings DROP COLUMN mount_id; ALTER TABLE node_publications "
                   "DROP COLUMN "
                   "mount_id; DROP TABLE nodes; DROP TABLE volume_moves; PRAGMA user_version = 1")
            .is_ok());
  }
  auto store = open_store(dir.path);
  CHECK(store->find_volume("local-1")->has_value());
  CHECK(store->insert_snapshot(make_snapshot(std::string(64, 'c'), "new", "local-1", 1)).is_ok());
}

TEST_CASE("snapshots: a pending record is updated once, found by commit, and is never a parent",
          "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir.path);
  REQUIRE(store->insert_snapshot(make_snapshot("snap-old", "old", "local-1", 10)).is_ok());
  SnapshotRecord pending = make_snapshot("snap-new", "new", "local-1", 20);
  pending.ready = false;
  pending.commit_id = "";
  pending.size_bytes = 0;
  REQUIRE(store->insert_snapshot(pending).is_ok());
  CHECK(store->latest_snapshot_of("local-1")->value().name == "old");
  CHECK_FALSE(store->find_snapshot_by_commit("")->has_value());

  SnapshotRecord done = pending;
  done.ready = true;
  done.commit_id = std::string(64, 'e');
  done.size_bytes = 4096;
  REQUIRE(store->update_snapshot(done).is_ok());
  CHECK(store->find_snapshot("snap-new")->value() == done);
  CHECK(store->find_snapshot_by_commit(done.commit_id)->value().id == "snap-new");
  CHECK(store->latest_snapshot_of("local-1")->value().name == "new");

  SnapshotRecord failed = make_snapshot("snap-gone", "gone", "local-1", 30);
  failed.failure_code = static_cast<int>(Code::kAborted);
  CHECK(store->update_snapshot(failed).code() == Code::kNotFound);
}

TEST_CASE("snapshots: a version 2 database migrates, its ids kept and copied to commit ids",
          "[state_store]") {
  testing::ScratchDir dir;
  { open_store(dir.path); }
  {
    // Turn it back into what rosetctl with schema 2 wrote, with one snapshot in it.
    auto connection = sqlite::Connection::open(dir.path + "/state.db");
    REQUIRE(connection.has_value());
    REQUIRE(
        connection
            ->exec("DROP TABLE snapshots; CREATE TABLE snapshots (id TEXT NOT NULL PRIMARY "
                   "KEY, name TEXT NOT NULL UNIQUE, provider TEXT NOT NULL, source_volume_id "
                   "TEXT NOT NULL, source_volume_name TEXT NOT NULL, parent_id TEXT NOT NULL, "
                   "message TEXT NOT NULL, parameters TEXT NOT NULL, size_bytes INTEGER NOT "
                   "NULL, file_count INTEGER NOT NULL, new_bytes INTEGER NOT NULL, "
                   "created_at_ns INTEGER NOT NULL) STRICT; INSERT INTO snapshots VALUES "
                   "('ab12', 'legacy', 'local', 'local-1', 'v', '', 'm', '{}', 7, 1, 7, 5); "
                   "ALTER TABLE volumes DROP COLUMN mutable_parameters; "
                   "ALTER TABLE stagings DROP COLUMN mount_ns; ALTER TABLE stagings DROP COLUMN "
                   "mount_fingerprint; ALTER TABLE node_publications DROP COLUMN mount_ns; "
                   "ALTER TABLE node_publications DROP COLUMN mount_fingerprint; "
                   "ALTER TABLE node_publications DROP COLUMN volume_context; "
                   "ALTER TABLE stagings DROP COLUMN mount_id; ALTER TABLE node_publications "
                   "DROP COLUMN "
                   "mount_id; DROP TABLE nodes; DROP TABLE volume_moves; PRAGMA user_version = 2")
            .is_ok());
  }
  auto store = open_store(dir.path);
  auto legacy = store->find_snapshot_by_commit("ab12");
  REQUIRE(legacy->has_value());
  CHECK((*legacy)->id == "ab12");
  CHECK((*legacy)->ready);
  CHECK((*legacy)->failure_code == 0);
  CHECK((*legacy)->context.empty());
}

TEST_CASE("snapshots: the context the provider describes is kept once ready", "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir.path);
  SnapshotRecord pending = make_snapshot("snap-1", "img", "local-1", 10);
  pending.ready = false;
  pending.commit_id.clear();
  REQUIRE(store->insert_snapshot(pending).is_ok());
  CHECK(store->find_snapshot("snap-1")->value().context.empty());
  SnapshotRecord ready = pending;
  ready.ready = true;
  ready.commit_id = std::string(64, 'c');
  ready.context = {{"type", "image"}, {"access", "block"}};
  REQUIRE(store->update_snapshot(ready).is_ok());
  CHECK(store->find_snapshot("snap-1")->value() == ready);
}

TEST_CASE("snapshots: a version 3 database migrates; old snapshots' source size is unknown",
          "[state_store]") {
  testing::ScratchDir dir;
  {
    auto store = open_store(dir.path);
    VolumeRecord volume{"local-1", "kept", "local", 5 << 20, {}, {}, "mount", "", 1};
    REQUIRE(store->insert_volume(volume).is_ok());
    REQUIRE(store->insert_snapshot(make_snapshot("snap-1", "of-kept", "local-1", 1)).is_ok());
    REQUIRE(store->insert_snapshot(make_snapshot("snap-2", "of-gone", "local-2", 2)).is_ok());
  }
  {
    // Turn it back into what rosetctl with schema 3 wrote.
    auto connection = sqlite::Connection::open(dir.path + "/state.db");
    REQUIRE(connection.has_value());
    REQUIRE(
        connection
            ->exec("ALTER TABLE volumes DROP COLUMN mutable_parameters; ALTER TABLE snapshots "
                   "DROP COLUMN pulled_from; ALTER TABLE snapshots "
                   "DROP COLUMN source_capacity_bytes; ALTER TABLE snapshots DROP COLUMN context; "
                   "ALTER TABLE stagings DROP COLUMN mount_ns; ALTER TABLE stagings DROP COLUMN "
                   "mount_fingerprint; ALTER TABLE node_publications DROP COLUMN mount_ns; "
                   "ALTER TABLE node_publications DROP COLUMN mount_fingerprint; "
                   "ALTER TABLE node_publications DROP COLUMN volume_context; "
                   "ALTER TABLE stagings DROP COLUMN mount_id; ALTER TABLE node_publications DROP "
                   "COLUMN "
                   "mount_id; DROP TABLE nodes; DROP TABLE volume_moves; PRAGMA user_version = 3")
            .is_ok());
  }
  auto store = open_store(dir.path);
  auto volume = store->find_volume("local-1");
  REQUIRE(volume->has_value());
  CHECK((*volume)->mutable_parameters.empty());
  // Not the volume's size now (it may have grown since the snapshot): unknown.
  CHECK(store->find_snapshot("snap-1")->value().source_capacity_bytes == 0);
  CHECK(store->find_snapshot("snap-2")->value().source_capacity_bytes == 0);
}

TEST_CASE("snapshots: a version 8 database migrates; rows pulled before say \"?\", not a node",
          "[state_store]") {
  testing::ScratchDir dir;
  {
    auto store = open_store(dir.path);
    REQUIRE(store->insert_snapshot(make_snapshot("snap-1", "taken", "local-1", 1)).is_ok());
    // Pulled: its source volume is named by its placed id on the node it came from.
    REQUIRE(
        store->insert_snapshot(make_snapshot("snap-2", "pulled", "n6.node-a.local-9", 2)).is_ok());
  }
  {
    // Turn it back into what rosetctl with schema 8 wrote.
    auto connection = sqlite::Connection::open(dir.path + "/state.db");
    REQUIRE(connection.has_value());
    REQUIRE(
        connection
            ->exec("ALTER TABLE stagings DROP COLUMN mount_ns; ALTER TABLE stagings DROP COLUMN "
                   "mount_fingerprint; ALTER TABLE node_publications DROP COLUMN mount_ns; "
                   "ALTER TABLE node_publications DROP COLUMN mount_fingerprint; "
                   "ALTER TABLE node_publications DROP COLUMN volume_context; "
                   "ALTER TABLE snapshots DROP COLUMN pulled_from; DROP TABLE volume_moves; "
                   "ALTER TABLE nodes DROP COLUMN cordoned_at_ns; PRAGMA user_version = 8")
            .is_ok());
  }
  auto store = open_store(dir.path);
  CHECK(store->find_snapshot("snap-1")->value().pulled_from.empty());
  // Where it came from is unknown: it is trusted as node-a's only once node-a confirms it.
  CHECK(store->find_snapshot("snap-2")->value().pulled_from == "?");
  REQUIRE(store->set_snapshot_pulled_from("snap-2", "node-a").is_ok());
  CHECK(store->find_snapshot("snap-2")->value().pulled_from == "node-a");
  CHECK(store->set_snapshot_pulled_from("snap-9", "node-a").code() == Code::kNotFound);
}

TEST_CASE("snapshots: the node a snapshot was pulled from is kept", "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir.path);
  SnapshotRecord pulled = make_snapshot("snap-1", "pulled", "n6.node-a.local-9", 1);
  pulled.pulled_from = "node-a";
  REQUIRE(store->insert_snapshot(pulled).is_ok());
  CHECK(store->find_snapshot("snap-1")->value() == pulled);
}
