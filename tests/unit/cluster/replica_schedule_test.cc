// Tests for src/cluster/replica_schedule.cc: intervals read and written back, the range
// refused naming the option, and which replicas a loop pass takes, in what order.
#include "cluster/replica_schedule.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace rosetctl {
namespace {

VolumeReplicaRecord due_at(const std::string& id, int64_t due) {
  VolumeReplicaRecord replica;
  replica.volume_id = id;
  replica.to_node = "node-b";
  replica.every_seconds = 600;
  replica.next_due_unix = due;
  return replica;
}

TEST_CASE("replica schedule: intervals with units read and print back", "[replica]") {
  CHECK(*replica::parse_every("90s") == 90);
  CHECK(*replica::parse_every("10m") == 600);
  CHECK(*replica::parse_every("1h") == 3600);
  CHECK(*replica::parse_every("2d") == 2 * 86400);
  CHECK(*replica::parse_every("600") == 600);
  CHECK(*replica::parse_every("2s") == replica::kMinEverySeconds);
  for (int64_t seconds : {2, 59, 60, 90, 600, 3600, 5400, 86400, 7 * 86400})
    CHECK(*replica::parse_every(replica::every_text(seconds)) == seconds);
  CHECK(replica::every_text(600) == "10m");
  CHECK(replica::every_text(90) == "90s");
}

TEST_CASE("replica schedule: what is no interval, or out of range, is refused naming it",
          "[replica]") {
  for (std::string bad : {"", "m", "10x", "-5m", "1.5h", "10 m", "ten", "99999999999999999999",
                          "9223372036854775807d"}) {
    auto parsed = replica::parse_every(bad);
    INFO(bad);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.status().code() == Code::kInvalidArgument);
    CHECK_THAT(parsed.status().message(), Catch::Contains("--every"));
  }
  auto short_one = replica::parse_every("1s");
  REQUIRE_FALSE(short_one);
  CHECK_THAT(short_one.status().message(), Catch::Contains("out of range: 2s to 7d"));
  CHECK_FALSE(replica::parse_every("8d"));
  CHECK_FALSE(replica::parse_every("0"));
  CHECK(replica::check_every(1, "every_seconds").code() == Code::kInvalidArgument);
  CHECK(replica::check_every(-600, "every_seconds").code() == Code::kInvalidArgument);
  CHECK(replica::check_every(600, "every_seconds").is_ok());
}

TEST_CASE("replica schedule: a pass takes what is due, the longest overdue first", "[replica]") {
  std::vector<VolumeReplicaRecord> replicas = {due_at("c", 100), due_at("a", 50), due_at("b", 100),
                                               due_at("later", 101)};
  CHECK(replica::due_replicas(replicas, 100) == std::vector<std::string>{"a", "b", "c"});
  CHECK(replica::due_replicas(replicas, 49).empty());
  CHECK(replica::due_replicas(replicas, 1000).size() == 4);
  CHECK(replica::due_replicas({}, 1000).empty());
}

TEST_CASE("replica schedule: the next round is one interval after a round's start", "[replica]") {
  CHECK(replica::next_due_after(1000, 600) == 1600);
  // A round that took longer than its interval is due at once when it ends: never later.
  int64_t started = 1000;
  int64_t ended = 1700;
  CHECK(replica::due_replicas({due_at("v", replica::next_due_after(started, 600))}, ended) ==
        std::vector<std::string>{"v"});
  // Never sooner than the minimum, whatever a record holds.
  CHECK(replica::next_due_after(1000, 0) == 1000 + replica::kMinEverySeconds);
}

}  // namespace
}  // namespace rosetctl
