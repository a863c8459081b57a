// Tests for src/core/state_store/volume_replicas.cc: a replica's setting and its rounds, a new
// target forgetting the old target's snapshots, and a round's outcome kept only while the
// setting still names its node.
#include <catch2/catch.hpp>
#include <string>

#include "core/state_store.h"
#include "unit/scratch_dir.h"

namespace rosetctl {
namespace {

std::unique_ptr<StateStore> open_replica_store(const std::string& dir) {
  Expected<std::unique_ptr<StateStore>> store = StateStore::open(dir);
  INFO(store.status().message());
  REQUIRE(store.has_value());
  return std::move(*store);
}

TEST_CASE("volume replicas: set, made due, a round recorded, removed", "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_replica_store(dir / "state");
  CHECK_FALSE(*store->find_volume_replica("n1.a.v1"));
  CHECK(store->set_volume_replica_due("n1.a.v1", 5).code() == Code::kNotFound);
  REQUIRE(store->put_volume_replica("n1.a.v1", "b", 600, 100).is_ok());
  auto set = store->find_volume_replica("n1.a.v1");
  REQUIRE(set.has_value());
  REQUIRE(set->has_value());
  CHECK((*set)->to_node == "b");
  CHECK((*set)->every_seconds == 600);
  CHECK((*set)->next_due_unix == 100);
  CHECK((*set)->rounds == 0);

  VolumeReplicaRecord round = **set;
  round.snapshot_id = "n1.b.s1";
  round.source_snapshot_id = "n1.a.s1";
  round.last_success_unix = 110;
  round.last_bytes_sent = 4096;
  round.rounds = 1;
  REQUIRE(store->record_volume_replica_round(round).is_ok());
  REQUIRE(store->set_volume_replica_due("n1.a.v1", 700).is_ok());
  round.next_due_unix = 700;
  CHECK(**store->find_volume_replica("n1.a.v1") == round);
  // Another interval keeps the rounds; the setting's due time is the one given.
  REQUIRE(store->put_volume_replica("n1.a.v1", "b", 60, 120).is_ok());
  CHECK((*store->find_volume_replica("n1.a.v1"))->snapshot_id == "n1.b.s1");
  CHECK((*store->list_volume_replicas()).size() == 1);

  REQUIRE(store->remove_volume_replica("n1.a.v1").is_ok());
  CHECK_FALSE(*store->find_volume_replica("n1.a.v1"));
  CHECK(store->remove_volume_replica("n1.a.v1").is_ok());
  CHECK(store->record_volume_replica_round(round).code() == Code::kNotFound);
}

TEST_CASE("volume replicas: another node forgets the last round; its late outcome is dropped",
          "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_replica_store(dir / "state");
  REQUIRE(store->put_volume_replica("n1.a.v1", "b", 600, 100).is_ok());
  VolumeReplicaRecord round = **store->find_volume_replica("n1.a.v1");
  round.snapshot_id = "n1.b.s1";
  round.rounds = 1;
  REQUIRE(store->record_volume_replica_round(round).is_ok());
  REQUIRE(store->put_volume_replica("n1.a.v1", "c", 600, 100).is_ok());
  auto moved = **store->find_volume_replica("n1.a.v1");
  CHECK(moved.to_node == "c");
  CHECK(moved.snapshot_id.empty());
  CHECK(moved.rounds == 0);
  // A round for "b" that ends now is not recorded as "c"'s.
  round.rounds = 2;
  CHECK(store->record_volume_replica_round(round).code() == Code::kNotFound);
  CHECK((*store->find_volume_replica("n1.a.v1"))->rounds == 0);
}

}  // namespace
}  // namespace rosetctl
