// Tests for StateStore::node_publish_state (src/core/state_store/node_publish_state.cc):
// NodePublishVolume's four records read in one transaction are the records the separate finds
// give, absent ones are absent, and the connection it read on goes back to the pool usable.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "core/state_store.h"
#include "unit/core/open_state_store.h"
#include "unit/scratch_dir.h"

namespace rosetctl {
namespace {

VolumeRecord volume(const std::string& id) {
  VolumeRecord record;
  record.id = id;
  record.name = "name-of-" + id;
  record.provider = "local";
  record.access_type = "mount";
  record.context = {{"k", "v"}};
  return record;
}

TEST_CASE("state store: a publish's records in one read are those the finds give",
          "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir / "state");
  REQUIRE(store->insert_volume(volume("v1")).is_ok());
  REQUIRE(store->upsert_staging({"v1", "/stage/v1", "mount", true, {5, 1, {}}}).is_ok());
  NodePublication publication{"v1",  "/t1", "/stage/v1", true,
                              "cap", false, {7, 1, {}},  {{"a", "b"}}};
  REQUIRE(store->upsert_node_publication(publication).is_ok());

  auto state = store->node_publish_state("v1", "/stage/v1", "/t1");
  INFO(state.status().message());
  REQUIRE(state.has_value());
  CHECK(state->volume == *store->find_volume("v1"));
  REQUIRE(state->volume.has_value());
  CHECK(state->volume->context == std::map<std::string, std::string>{{"k", "v"}});
  CHECK(state->staging == *store->find_staging("v1", "/stage/v1"));
  CHECK(state->staging->mount.id == 5);
  CHECK(state->publication == publication);
  CHECK_FALSE(state->move.has_value());

  // Paused for a move: the move is read with the rest (the publication must go first).
  REQUIRE(store->delete_node_publication("/t1").is_ok());
  REQUIRE(store->delete_staging("v1", "/stage/v1").is_ok());
  REQUIRE(store->pause_volume_move("v1", "node-b").is_ok());
  state = store->node_publish_state("v1", "/stage/v1", "/t1");
  REQUIRE(state.has_value());
  REQUIRE(state->move.has_value());
  CHECK(state->move->to_node == "node-b");
  CHECK_FALSE(state->move->moved);
}

TEST_CASE("state store: a publish's read names what is missing by leaving it empty",
          "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir / "state");
  // A node plugin's own state: no volume record, a staging, another volume's target.
  REQUIRE(store->upsert_staging({"v2", "/stage/v2", "mount", false}).is_ok());
  REQUIRE(
      store->upsert_node_publication({"other", "/t", "/stage/other", false, "cap", false}).is_ok());
  for (int round = 0; round < 3; ++round) {  // the same pooled connection, read again
    auto state = store->node_publish_state("v2", "/stage/v2", "/t");
    REQUIRE(state.has_value());
    CHECK_FALSE(state->volume.has_value());
    CHECK_FALSE(state->move.has_value());
    CHECK(state->staging.has_value());
    REQUIRE(state->publication.has_value());
    CHECK(state->publication->volume_id == "other");
    CHECK_FALSE(store->node_publish_state("v2", "/stage/elsewhere", "/none")->staging);
  }
  // The read transaction ended: a write (another connection) and a read after it see each other.
  REQUIRE(store->delete_node_publication("/t").is_ok());
  CHECK_FALSE(store->node_publish_state("v2", "/stage/v2", "/t")->publication.has_value());
  CHECK(store->pooled_connections() >= 1);
}

}  // namespace
}  // namespace rosetctl
