// Tests for src/core/state_store/volume_moves.cc: a move's pause is refused while anything
// holds the volume, is idempotent for its node only, and its record goes with the volume; and
// the condition a moving volume reports reads back as the move (core/move_condition.h).
#include <catch2/catch.hpp>
#include <string>

#include "core/move_condition.h"
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
  return record;
}

TEST_CASE("volume moves: a pause is refused while the volume is staged, naming where",
          "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir / "state");
  REQUIRE(store->insert_volume(volume("v1")).is_ok());
  REQUIRE(store->upsert_staging({"v1", "/stage/v1", "mount", false}).is_ok());
  Status paused = store->pause_volume_move("v1", "node-b");
  CHECK(paused.code() == Code::kFailedPrecondition);
  CHECK_THAT(paused.message(), Catch::Contains("is in use") && Catch::Contains("/stage/v1"));
  auto move = store->find_volume_move("v1");
  REQUIRE(move.has_value());
  CHECK_FALSE(move->has_value());
  CHECK(store->pause_volume_move("nobody", "node-b").code() == Code::kNotFound);
}

TEST_CASE("volume moves: pause, finish and their repeats; another node is refused",
          "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir / "state");
  REQUIRE(store->insert_volume(volume("v1")).is_ok());
  CHECK(store->finish_volume_move("v1", "node-b", "n6.node-b.v9").code() ==
        Code::kFailedPrecondition);  // not paused
  REQUIRE(store->pause_volume_move("v1", "node-b").is_ok());
  REQUIRE(store->pause_volume_move("v1", "node-b").is_ok());
  CHECK(store->pause_volume_move("v1", "node-c").code() == Code::kFailedPrecondition);
  REQUIRE(store->finish_volume_move("v1", "node-b", "n6.node-b.v9").is_ok());
  REQUIRE(store->finish_volume_move("v1", "node-b", "n6.node-b.v9").is_ok());
  CHECK(store->finish_volume_move("v1", "node-b", "n6.node-b.v8").code() ==
        Code::kFailedPrecondition);
  CHECK(store->cancel_volume_move("v1").code() == Code::kFailedPrecondition);
  Status again = store->pause_volume_move("v1", "node-b");
  CHECK(again.code() == Code::kFailedPrecondition);
  CHECK_THAT(again.message(), Catch::Contains("n6.node-b.v9"));
  auto move = store->find_volume_move("v1");
  REQUIRE(move.has_value());
  REQUIRE(move->has_value());
  CHECK(**move == VolumeMove{"v1", "node-b", true, "n6.node-b.v9"});

  // The record goes with the volume: a volume made again under that id has moved nowhere.
  REQUIRE(store->delete_volume("v1").is_ok());
  REQUIRE(store->insert_volume(volume("v1")).is_ok());
  move = store->find_volume_move("v1");
  REQUIRE(move.has_value());
  CHECK_FALSE(move->has_value());
}

TEST_CASE("volume moves: a cancelled pause leaves the volume as before", "[state_store]") {
  testing::ScratchDir dir;
  auto store = open_store(dir / "state");
  REQUIRE(store->insert_volume(volume("v1")).is_ok());
  REQUIRE(store->cancel_volume_move("v1").is_ok());  // nothing to cancel
  REQUIRE(store->pause_volume_move("v1", "node-b").is_ok());
  REQUIRE(store->cancel_volume_move("v1").is_ok());
  auto move = store->find_volume_move("v1");
  REQUIRE(move.has_value());
  CHECK_FALSE(move->has_value());
  REQUIRE(store->pause_volume_move("v1", "node-c").is_ok());
}

TEST_CASE("volume moves: the condition a paused or moved volume reports reads back as its move",
          "[state_store]") {
  auto paused = parse_move_condition(paused_move_condition("node-b"));
  REQUIRE(paused.has_value());
  CHECK_FALSE(paused->moved);
  CHECK(paused->to_node == "node-b");
  CHECK(paused->new_volume_id.empty());
  auto moved = parse_move_condition(moved_condition("node-b", "n6.node-b.local-0123"));
  REQUIRE(moved.has_value());
  CHECK(moved->moved);
  CHECK(moved->to_node == "node-b");
  CHECK(moved->new_volume_id == "n6.node-b.local-0123");
  // Any other condition is no move, a truncated one neither.
  CHECK_FALSE(parse_move_condition("volume is healthy").has_value());
  CHECK_FALSE(parse_move_condition("image file is missing").has_value());
  CHECK_FALSE(parse_move_condition("paused while it moves to node \"node-b").has_value());
  CHECK_FALSE(
      parse_move_condition("paused while it moves to node \"node-b\" and more").has_value());
  CHECK_FALSE(parse_move_condition("moved to node \"node-b\" as ").has_value());
  CHECK_FALSE(parse_move_condition("moved to node \"\" as x; y").has_value());
}

}  // namespace
}  // namespace rosetctl
