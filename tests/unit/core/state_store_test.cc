// Tests for src/core/state_store.cc: migrations, record round trips, the delete guard, and
// concurrent use from threads and from separate processes.
#include "core/state_store.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/sqlite.h"
#include "unit/core/open_state_store.h"
#include "unit/scratch_dir.h"

namespace rosetctl {
namespace {

using TempDir = testing::ScratchDir;

VolumeRecord make_volume(const std::string& id, const std::string& name) {
  VolumeRecord volume;
  volume.id = id;
  volume.name = name;
  volume.provider = "local";
  volume.capacity_bytes = int64_t{1} << 30;
  volume.parameters = {{"fsType", "ext4"}, {"quote\"d", "ünïcode ✓"}};
  volume.context = {{"path", "/var/lib/rosetctl/volumes/" + id}};
  volume.access_type = "mount";
  volume.content_source = "snapshot:s1";
  volume.created_at = 1'700'000'000;
  volume.mutable_parameters = {{"directIO", "false"}};
  return volume;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

int schema_version_on_disk(const std::string& db_path) {
  Expected<sqlite::Connection> connection = sqlite::Connection::open(db_path);
  REQUIRE(connection.has_value());
  Expected<sqlite::Statement> statement = connection->prepare("PRAGMA user_version");
  REQUIRE(statement.has_value());
  REQUIRE(*statement->step());
  return static_cast<int>(statement->column_int64(0));
}

// Forks `count` children that start `body(index)` together (released through a pipe, so they
// really race) and returns their exit statuses. Children report through their exit status only.
std::vector<int> run_in_children(int count, const std::function<int(int)>& body) {
  int barrier[2];
  REQUIRE(::pipe(barrier) == 0);
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(barrier[1]);
      char byte;
      while (::read(barrier[0], &byte, 1) < 0 && errno == EINTR) {
      }
      ::_exit(body(i));
    }
    children.push_back(pid);
  }
  ::close(barrier[0]);
  ::close(barrier[1]);  // EOF on the pipe releases every child at once
  std::vector<int> statuses;
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    statuses.push_back(WEXITSTATUS(status));
  }
  return statuses;
}

}  // namespace

TEST_CASE("state store: opening creates a private directory and migrates", "[state_store]") {
  TempDir tmp;
  const std::string dir = tmp / "a/b/state";
  { open_store(dir); }
  CHECK(mode_of(tmp / "a") == 0700);
  CHECK(mode_of(dir) == 0700);
  CHECK(mode_of(dir + "/state.db") == 0600);
  CHECK(schema_version_on_disk(dir + "/state.db") == StateStore::kSchemaVersion);
  // Opening again is a no-op migration.
  auto store = open_store(dir);
  CHECK(store->path() == dir + "/state.db");
  CHECK(*store->count_volumes() == 0);
}

TEST_CASE("state store: a state directory or database others may write is refused",
          "[state_store]") {
  TempDir tmp;
  const std::string dir = tmp / "state";
  { open_store(dir); }
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  Expected<std::unique_ptr<StateStore>> open_dir = StateStore::open(dir);
  REQUIRE_FALSE(open_dir.has_value());
  CHECK(open_dir.status().code() == Code::kFailedPrecondition);
  CHECK(open_dir.status().message().find("writable by its group or by anyone (mode 0777)") !=
        std::string::npos);
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);  // readable by others is the admin's choice
  CHECK(StateStore::open(dir).has_value());
  REQUIRE(::chmod((dir + "/state.db").c_str(), 0620) == 0);
  Expected<std::unique_ptr<StateStore>> open_db = StateStore::open(dir);
  REQUIRE_FALSE(open_db.has_value());
  CHECK(open_db.status().message().find("state database") != std::string::npos);
  REQUIRE(::chmod((dir + "/state.db").c_str(), 0600) == 0);
  // A link in the database's place is not followed.
  const std::string other = tmp / "other";
  { open_store(other); }
  REQUIRE(::rename((dir + "/state.db").c_str(), (tmp / "moved.db").c_str()) == 0);
  REQUIRE(::symlink((other + "/state.db").c_str(), (dir + "/state.db").c_str()) == 0);
  Expected<std::unique_ptr<StateStore>> linked = StateStore::open(dir);
  REQUIRE_FALSE(linked.has_value());
  CHECK(linked.status().message().find("symbolic link") != std::string::npos);
  if (::geteuid() == 0) {
    REQUIRE(::unlink((dir + "/state.db").c_str()) == 0);
    REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
    Expected<std::unique_ptr<StateStore>> owned = StateStore::open(dir);
    REQUIRE_FALSE(owned.has_value());
    CHECK(owned.status().message().find("belongs to uid 65534") != std::string::npos);
    REQUIRE(::chown(dir.c_str(), 0, 0) == 0);
  }
}

TEST_CASE("state store: a database from a newer rosetctl is refused", "[state_store]") {
  TempDir tmp;
  const std::string db_path = tmp / "state.db";
  { open_store(tmp.path); }
  {
    Expected<sqlite::Connection> connection = sqlite::Connection::open(db_path);
    REQUIRE(connection.has_value());
    const int future = StateStore::kSchemaVersion + 1;
    REQUIRE(connection->exec("PRAGMA user_version = " + std::to_string(future)).is_ok());
  }
  Expected<std::unique_ptr<StateStore>> store = StateStore::open(tmp.path);
  REQUIRE_FALSE(store.has_value());
  CHECK(store.status().code() == Code::kFailedPrecondition);
  CHECK(store.status().message() ==
        fmt::format("state database {} has schema version {}, newer than this rosetctl "
                    "understands ({}); upgrade rosetctl",
                    db_path, StateStore::kSchemaVersion + 1, StateStore::kSchemaVersion));
}

TEST_CASE("state store: volumes round trip and survive reopening", "[state_store]") {
  TempDir tmp;
  const VolumeRecord volume = make_volume("v1", "data");
  {
    auto store = open_store(tmp.path);
    REQUIRE(store->insert_volume(volume).is_ok());
    CHECK(*store->find_volume("v1") == volume);
    CHECK(*store->find_volume_by_name("data") == volume);
    CHECK_FALSE(store->find_volume("nope")->has_value());
    CHECK_FALSE(store->find_volume_by_name("nope")->has_value());
  }
  auto store = open_store(tmp.path);
  CHECK(*store->find_volume("v1") == volume);

  REQUIRE(store->update_volume_capacity("v1", 5 << 20).is_ok());
  CHECK((*store->find_volume("v1"))->capacity_bytes == 5 << 20);
  CHECK(store->update_volume_capacity("nope", 1).code() == Code::kNotFound);

  REQUIRE(store->update_volume_mutable_parameters("v1", {{"directIO", "true"}}).is_ok());
  CHECK((*store->find_volume("v1"))->mutable_parameters ==
        std::map<std::string, std::string>{{"directIO", "true"}});
  CHECK((*store->find_volume("v1"))->parameters == volume.parameters);  // as created
  CHECK(store->update_volume_mutable_parameters("nope", {}).code() == Code::kNotFound);

  REQUIRE(store->delete_volume("v1").is_ok());
  CHECK_FALSE(store->find_volume("v1")->has_value());
  CHECK(store->delete_volume("v1").is_ok());  // idempotent
}

TEST_CASE("state store: a taken name or id is ALREADY_EXISTS and changes nothing",
          "[state_store]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  const VolumeRecord first = make_volume("v1", "data");
  REQUIRE(store->insert_volume(first).is_ok());

  VolumeRecord same_name = make_volume("v2", "data");
  same_name.capacity_bytes = 7;
  Status status = store->insert_volume(same_name);
  CHECK(status.code() == Code::kAlreadyExists);
  CHECK(status.message() == "volume name \"data\" is already taken by volume \"v1\"");

  status = store->insert_volume(make_volume("v1", "other"));
  CHECK(status.code() == Code::kAlreadyExists);
  CHECK(status.message() == "volume id \"v1\" is already taken by volume named \"data\"");

  CHECK(*store->find_volume("v1") == first);
  CHECK_FALSE(store->find_volume("v2")->has_value());
  CHECK(*store->count_volumes() == 1);
}

TEST_CASE("state store: volumes page by id", "[state_store]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  std::vector<std::string> ids;
  for (int i = 0; i < 25; ++i)
    ids.push_back(fmt::format("v{:02}", i));
  std::vector<std::string> shuffled = ids;
  std::reverse(shuffled.begin(), shuffled.end());
  for (const std::string& id : shuffled)
    REQUIRE(store->insert_volume(make_volume(id, "n" + id)).is_ok());
  CHECK(*store->count_volumes() == 25);

  std::vector<std::string> seen;
  std::string after;
  for (;;) {
    Expected<std::vector<VolumeRecord>> page = store->list_volumes(after, 10);
    REQUIRE(page.has_value());
    if (page->empty()) break;
    CHECK(page->size() <= 10);
    for (const VolumeRecord& volume : *page)
      seen.push_back(volume.id);
    after = page->back().id;
  }
  CHECK(seen == ids);
  CHECK(store->list_volumes("", 0)->size() == 25);
  CHECK(store->list_volumes("v20", -1)->size() == 4);
  CHECK(store->list_volumes("v24", 10)->empty());
}

TEST_CASE("state store: publications and stagings round trip", "[state_store]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  ControllerPublication publication{"v1", "n1", false, "mount/ext4/rw", {{"device", "/dev/x"}}};
  CHECK(store->upsert_controller_publication(publication).code() == Code::kNotFound);
  REQUIRE(store->insert_volume(make_volume("v1", "data")).is_ok());
  REQUIRE(store->upsert_controller_publication(publication).is_ok());
  CHECK(*store->find_controller_publication("v1", "n1") == publication);
  publication.readonly = true;
  REQUIRE(store->upsert_controller_publication(publication).is_ok());  // updates in place
  CHECK(*store->controller_publications("v1") == std::vector{publication});
  CHECK(*store->count_controller_publications_on_node("n1") == 1);
  CHECK(*store->count_controller_publications_on_node("n2") == 0);
  REQUIRE(store->delete_controller_publication("v1", "n1").is_ok());
  CHECK(store->delete_controller_publication("v1", "n1").is_ok());
  CHECK_FALSE(store->find_controller_publication("v1", "n1")->has_value());

  // Node-side rows need no volume row: that lives on the controller host.
  const Staging staging{"remote", "/stage/remote", "mount", true};
  REQUIRE(store->upsert_staging(staging).is_ok());
  CHECK(*store->find_staging("remote", "/stage/remote") == staging);
  CHECK(*store->stagings("remote") == std::vector{staging});
  const NodePublication a{"remote", "/t/a", "/stage/remote", true, "mount", true};
  // b keeps the volume_context NodePublish had: repairing a dead target needs it, and this
  // node has no volume row to take it from.
  const NodePublication b{"remote",
                          "/t/b",
                          "/stage/remote",
                          false,
                          "mount",
                          false,
                          {},
                          {{"rootPath", "/volumes/x"}, {"subPath", "a"}}};
  REQUIRE(store->upsert_node_publication(a).is_ok());
  REQUIRE(store->upsert_node_publication(b).is_ok());
  CHECK(*store->find_node_publication("/t/a") == a);
  CHECK((*store->find_node_publication("/t/b"))->volume_context.at("subPath") == "a");
  CHECK(*store->node_publications("remote") == std::vector{a, b});
  CHECK(*store->node_publications_of_staging("remote", "/stage/remote") == std::vector{a, b});
  CHECK(store->node_publications_of_staging("remote", "/elsewhere")->empty());
  REQUIRE(store->delete_node_publication("/t/a").is_ok());
  CHECK_FALSE(store->find_node_publication("/t/a")->has_value());
  REQUIRE(store->delete_staging("remote", "/stage/remote").is_ok());
  CHECK(store->stagings("remote")->empty());
}

TEST_CASE("state store: a published or staged volume cannot be deleted", "[state_store]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  REQUIRE(store->insert_volume(make_volume("X", "x")).is_ok());
  REQUIRE(store->upsert_controller_publication({"X", "n1", false, "c", {}}).is_ok());
  REQUIRE(store->upsert_staging({"X", "/p", "c", false}).is_ok());
  REQUIRE(store->upsert_node_publication({"X", "/t", "/p", false, "c", false}).is_ok());

  Status status = store->delete_volume("X");
  CHECK(status.code() == Code::kFailedPrecondition);
  CHECK_THAT(status.message(), Catch::Contains("volume \"X\" is still published to node \"n1\""));
  CHECK_THAT(status.message(), Catch::Contains("staged at \"/p\""));
  CHECK_THAT(status.message(), Catch::Contains("published at \"/t\""));

  REQUIRE(store->delete_controller_publication("X", "n1").is_ok());
  REQUIRE(store->delete_node_publication("/t").is_ok());
  status = store->delete_volume("X");
  CHECK(status.code() == Code::kFailedPrecondition);
  CHECK(status.message() ==
        "volume \"X\" is still staged at \"/p\"; unpublish and unstage it before deleting");
  CHECK(store->find_volume("X")->has_value());

  REQUIRE(store->delete_staging("X", "/p").is_ok());
  REQUIRE(store->delete_volume("X").is_ok());
  CHECK_FALSE(store->find_volume("X")->has_value());
}

namespace {

NodeRecord make_node(const std::string& id, int64_t seen_ns) {
  NodeRecord node;
  node.node_id = id;
  node.address = "[fd00::7]:9443";
  node.iscsi_initiator = "iqn.1993-08.org.debian:01:" + id;
  node.topology = {{"topology.rosetctl.io/node", id}};
  node.version = "0.1.0";
  node.registered_at_ns = seen_ns;
  node.last_seen_ns = seen_ns;
  return node;
}

}  // namespace

TEST_CASE("state store: nodes register idempotently and keep their first registration",
          "[state_store][nodes]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  CHECK(store->list_nodes()->empty());
  CHECK_FALSE(store->find_node("n1")->has_value());

  const NodeRecord first = make_node("n1", 1000);
  CHECK(*store->upsert_node(first) == first);
  REQUIRE(store->upsert_node(make_node("n0", 500)).has_value());
  CHECK(*store->find_node("n1") == first);

  // Registering again replaces what the node says about itself and when it was seen, never
  // when it first came.
  NodeRecord again = make_node("n1", 2000);
  again.address = "";
  again.iscsi_initiator = "";
  again.topology = {{"zone", "b"}};
  again.version = "0.2.0";
  NodeRecord expected = again;
  expected.registered_at_ns = 1000;
  CHECK(*store->upsert_node(again) == expected);
  CHECK(*store->find_node("n1") == expected);

  auto listed = store->list_nodes();
  REQUIRE(listed.has_value());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].node_id == "n0");  // ordered by id
  CHECK((*listed)[1] == expected);
}

TEST_CASE("state store: a node with publications is removed only by force, which keeps them",
          "[state_store][nodes]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  // Unknown: nothing to do, and that is no error.
  auto removal = store->delete_node("n1", false);
  REQUIRE(removal.has_value());
  CHECK_FALSE(removal->removed);

  REQUIRE(store->upsert_node(make_node("n1", 1)).has_value());
  REQUIRE(store->insert_volume(make_volume("v2", "logs")).is_ok());
  REQUIRE(store->insert_volume(make_volume("v1", "db")).is_ok());
  REQUIRE(store->upsert_controller_publication({"v1", "n1", false, "c", {}}).is_ok());
  REQUIRE(store->upsert_controller_publication({"v2", "n1", false, "c", {}}).is_ok());
  REQUIRE(store->upsert_controller_publication({"v2", "n2", false, "c", {}}).is_ok());

  removal = store->delete_node("n1", false);
  REQUIRE_FALSE(removal.has_value());
  CHECK(removal.status().code() == Code::kFailedPrecondition);
  CHECK(removal.status().message() ==
        "node \"n1\" still has volumes published to it: \"db\", \"logs\"");
  CHECK(store->find_node("n1")->has_value());

  removal = store->delete_node("n1", true);
  REQUIRE(removal.has_value());
  CHECK(removal->removed);
  CHECK(removal->published_volume_ids == std::vector<std::string>{"v1", "v2"});
  CHECK_FALSE(store->find_node("n1")->has_value());
  CHECK(*store->count_controller_publications_on_node("n1") == 2);
  // Gone already: removing it again is done, publications or not.
  removal = store->delete_node("n1", false);
  REQUIRE(removal.has_value());
  CHECK_FALSE(removal->removed);
  CHECK(removal->published_volume_ids == std::vector<std::string>{"v1", "v2"});

  // Without publications no force is needed; a second removal finds nothing.
  REQUIRE(store->upsert_node(make_node("n2", 1)).has_value());
  REQUIRE(store->delete_controller_publication("v2", "n2").is_ok());
  removal = store->delete_node("n2", false);
  REQUIRE(removal.has_value());
  CHECK(removal->removed);
  CHECK(removal->published_volume_ids.empty());
  CHECK_FALSE(store->delete_node("n2", false)->removed);
}

TEST_CASE("state store: a version 7 database migrates to 8 and keeps its records",
          "[state_store][nodes]") {
  TempDir tmp;
  const std::string db_path = tmp / "state.db";
  const ControllerPublication publication{"v1", "n1", false, "c", {{"readonly", "false"}}};
  {
    auto store = open_store(tmp.path);
    REQUIRE(store->insert_volume(make_volume("v1", "db")).is_ok());
    REQUIRE(store->upsert_controller_publication(publication).is_ok());
  }
  {
    // Turn it back into what rosetctl with schema 7 wrote.
    auto connection = sqlite::Connection::open(db_path);
    REQUIRE(connection.has_value());
    REQUIRE(
        connection
            ->exec("ALTER TABLE stagings DROP COLUMN mount_ns; ALTER TABLE stagings DROP COLUMN "
                   "mount_fingerprint; ALTER TABLE node_publications DROP COLUMN mount_ns; "
                   "ALTER TABLE node_publications DROP COLUMN mount_fingerprint; "
                   "ALTER TABLE node_publications DROP COLUMN volume_context; "
                   "DROP TABLE nodes; DROP TABLE volume_moves; DROP TABLE volume_replicas; "
                   "ALTER TABLE snapshots DROP COLUMN "
                   "pulled_from; PRAGMA "
                   "user_version = 7")
            .is_ok());
  }
  REQUIRE(schema_version_on_disk(db_path) == 7);
  auto store = open_store(tmp.path);
  CHECK(schema_version_on_disk(db_path) == StateStore::kSchemaVersion);
  CHECK(*store->find_volume("v1") == make_volume("v1", "db"));
  CHECK(*store->controller_publications("v1") == std::vector{publication});
  // A publication made before nodes were registered is no reason to refuse the registration.
  CHECK(store->list_nodes()->empty());
  REQUIRE(store->upsert_node(make_node("n1", 5)).has_value());
  CHECK(store->delete_node("n1", false).status().code() == Code::kFailedPrecondition);
}

TEST_CASE("state store: a version 14 database migrates to 15; its nodes are not cordoned",
          "[state_store][nodes]") {
  TempDir tmp;
  const std::string db_path = tmp / "state.db";
  {
    auto store = open_store(tmp.path);
    REQUIRE(store->upsert_node(make_node("n1", 5)).has_value());
  }
  {
    // Turn it back into what rosetctl with schema 14 wrote.
    auto connection = sqlite::Connection::open(db_path);
    REQUIRE(connection.has_value());
    REQUIRE(
        connection->exec("ALTER TABLE nodes DROP COLUMN cordoned_at_ns; PRAGMA user_version = 14")
            .is_ok());
  }
  auto store = open_store(tmp.path);
  CHECK(schema_version_on_disk(db_path) == StateStore::kSchemaVersion);
  auto node = store->find_node("n1");
  REQUIRE(node.has_value());
  REQUIRE(node->has_value());
  CHECK((*node)->cordoned_at_ns == 0);
  CHECK((*node)->registered_at_ns == make_node("n1", 5).registered_at_ns);
}

TEST_CASE("state store: a cordon outlives registrations and keeps its first time",
          "[state_store][nodes]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  CHECK(!store->set_node_cordoned("n1", 100)->has_value());  // not registered
  REQUIRE(store->upsert_node(make_node("n1", 5)).has_value());
  CHECK((*store->set_node_cordoned("n1", 100))->cordoned_at_ns == 100);
  CHECK((*store->set_node_cordoned("n1", 200))->cordoned_at_ns == 100);
  // A registration (the node's heartbeat) neither clears the cordon nor says it is gone.
  auto registered = store->upsert_node(make_node("n1", 6));
  REQUIRE(registered.has_value());
  CHECK(registered->cordoned_at_ns == 100);
  CHECK(store->find_node("n1")->value().cordoned_at_ns == 100);
  CHECK((*store->set_node_cordoned("n1", 0))->cordoned_at_ns == 0);
  CHECK(store->list_nodes()->at(0).cordoned_at_ns == 0);
}

TEST_CASE("state store: threads share one store", "[state_store]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = fmt::format("t{}-{:03}", t, i);
        if (!store->insert_volume(make_volume(id, "name-" + id)).is_ok()) ++failures;
        // Interleave reads so borrowed connections really overlap.
        if (!store->find_volume(id).has_value()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  CHECK(failures == 0);
  CHECK(*store->count_volumes() == kThreads * kPerThread);
  CHECK(store->list_volumes("", 0)->size() == kThreads * kPerThread);
}

TEST_CASE("state store: two processes open a fresh store and write together", "[state_store]") {
  TempDir tmp;
  const std::string dir = tmp / "state";
  const std::vector<int> statuses = run_in_children(2, [&](int child) {
    Expected<std::unique_ptr<StateStore>> store = StateStore::open(dir);
    if (!store) {
      std::fprintf(stderr, "child %d: %s\n", child, store.status().message().c_str());
      return 1;
    }
    for (int i = 0; i < 300; ++i) {
      const std::string id = fmt::format("p{}-{:03}", child, i);
      Status status = (*store)->insert_volume(make_volume(id, "name-" + id));
      if (!status) {
        std::fprintf(stderr, "child %d: %s\n", child, status.message().c_str());
        return 1;
      }
    }
    return 0;
  });
  CHECK(statuses == std::vector{0, 0});
  auto store = open_store(dir);
  CHECK(*store->count_volumes() == 600);
  CHECK(schema_version_on_disk(dir + "/state.db") == StateStore::kSchemaVersion);
}

TEST_CASE("state store: many processes opening a fresh store all succeed", "[state_store]") {
  // Regression: switching a fresh file to WAL used to fail at once with "database is locked"
  // when another process was switching it too.
  TempDir tmp;
  for (int round = 0; round < 10; ++round) {
    const std::string dir = tmp / fmt::format("round-{}", round);
    const std::vector<int> statuses = run_in_children(6, [&](int child) {
      Expected<std::unique_ptr<StateStore>> store = StateStore::open(dir);
      if (!store) {
        std::fprintf(stderr, "child %d: %s\n", child, store.status().message().c_str());
        return 1;
      }
      return (*store)->insert_volume(
                         make_volume(fmt::format("v{}", child), "n" + std::to_string(child)))
                     .is_ok()
                 ? 0
                 : 1;
    });
    CHECK(statuses == std::vector<int>(6, 0));
    CHECK(*open_store(dir)->count_volumes() == 6);
  }
}

TEST_CASE("state store: processes racing for one name: exactly one wins", "[state_store]") {
  TempDir tmp;
  constexpr int kNames = 50;
  const std::vector<int> wins = run_in_children(2, [&](int child) {
    Expected<std::unique_ptr<StateStore>> store = StateStore::open(tmp.path);
    if (!store) return 255;
    int won = 0;
    for (int i = 0; i < kNames; ++i) {
      Status status = (*store)->insert_volume(
          make_volume(fmt::format("c{}-{}", child, i), fmt::format("race-{}", i)));
      if (status.is_ok()) {
        ++won;
      } else if (status.code() != Code::kAlreadyExists) {
        std::fprintf(stderr, "child %d: %s\n", child, status.message().c_str());
        return 255;
      }
    }
    return won;
  });
  REQUIRE(wins.size() == 2);
  CHECK(wins[0] != 255);
  CHECK(wins[1] != 255);
  CHECK(wins[0] + wins[1] == kNames);
  auto store = open_store(tmp.path);
  CHECK(*store->count_volumes() == kNames);
  for (int i = 0; i < kNames; ++i) {
    CHECK(store->find_volume_by_name(fmt::format("race-{}", i))->has_value());
  }
}

TEST_CASE("state store: a burst's read connections are kept, then closed once idle",
          "[state_store]") {
  TempDir tmp;
  auto store = open_store(tmp.path);
  REQUIRE(store->insert_volume(make_volume("v1", "data")).is_ok());

  // Concurrent reads until more connections are pooled than are kept for good.
  std::atomic<bool> enough = false;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::thread> readers;
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&] {
      while (!enough && std::chrono::steady_clock::now() < give_up) {
        if (!store->find_volume("v1")) return;
        if (store->pooled_connections() > StateStore::kKeptConnections) enough = true;
      }
    });
  }
  for (auto& reader : readers)
    reader.join();
  REQUIRE(enough);
  std::size_t burst = store->pooled_connections();
  CHECK(burst <= StateStore::kMaxPooledConnections);

  store->close_idle_connections(std::chrono::hours(1));  // nothing has been idle that long
  CHECK(store->pooled_connections() == burst);
  store->close_idle_connections(std::chrono::seconds(0));
  CHECK(store->pooled_connections() == StateStore::kKeptConnections);

  CHECK(*store->find_volume("v1") == make_volume("v1", "data"));  // the kept ones still serve
  CHECK(store->pooled_connections() == StateStore::kKeptConnections);
}

}  // namespace rosetctl
