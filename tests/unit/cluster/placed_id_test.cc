// Tests for src/cluster/placed_id.cc and placed_fields.cc: placed ids and combined-list tokens
// round-trip, other ids are left alone, and an id over CSI's 128 bytes is refused naming the node.
#include "cluster/placed_id.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cluster/placed_fields.h"
#include "core/validate.h"
#include "csi.pb.h"
#include "rosetctl.pb.h"

namespace rosetctl {
namespace {

TEST_CASE("a placed id names its node and local id and round-trips", "[placed_id]") {
  auto id = encode_placed_id("node-a", "local-0123456789abcdef");
  REQUIRE(id);
  CHECK(*id == "n6.node-a.local-0123456789abcdef");
  CHECK(validate_id(*id, "id"));  // a valid CSI id of ours: [A-Za-z0-9._-], at most 128 bytes
  auto placed = decode_placed_id(*id);
  REQUIRE(placed);
  CHECK(placed->node == "node-a");
  CHECK(placed->local_id == "local-0123456789abcdef");
}

TEST_CASE("node ids holding dots and digits round-trip", "[placed_id]") {
  for (std::string node : {"a", "n1.n2", "10.0.0.7", "host.example.com", "n6.node-a.x"}) {
    auto id = encode_placed_id(node, "snap-0123456789abcdef01234567");
    REQUIRE(id);
    auto placed = decode_placed_id(*id);
    REQUIRE(placed);
    CHECK(placed->node == node);
    CHECK(placed->local_id == "snap-0123456789abcdef01234567");
  }
}

TEST_CASE("ids this host issued are not placed ids", "[placed_id]") {
  for (std::string id :
       std::vector<std::string>{"local-0123456789abcdef", "snap-0123456789abcdef01234567", "n",
                                "n6", "n6.node-a", "n6.node-a.", "n06.node-a.x", "n7.node-a.x",
                                "nx.a.b", "n0..x", "n1.a.b/c", std::string(64, 'a')}) {
    CAPTURE(id);
    CHECK_FALSE(decode_placed_id(id));
  }
}

TEST_CASE("an id over 128 bytes is refused naming the node and the length it may have",
          "[placed_id]") {
  std::string node(100, 'x');
  auto id = encode_placed_id(node, "snap-0123456789abcdef01234567");
  REQUIRE_FALSE(id);
  CHECK(id.status().code() == Code::kInvalidArgument);
  CHECK_THAT(id.status().message(), Catch::Contains(node.substr(0, 60)));
  CHECK_THAT(id.status().message(), Catch::Contains("at most 93 bytes"));
  CHECK(encode_placed_id(std::string(93, 'x'), "snap-0123456789abcdef01234567"));
}

TEST_CASE("a combined-list token names a node and that node's own token", "[placed_id]") {
  for (ListPosition position :
       {ListPosition{"node-a", ""}, ListPosition{"b.c", "local-01"}, ListPosition{"n", "1.x.y"}}) {
    auto decoded = decode_list_token(encode_list_token(position));
    REQUIRE(decoded);
    CHECK(decoded->node == position.node);
    CHECK(decoded->token == position.token);
  }
  CHECK(encode_list_token({"node-a", "local-01"}) == "6.node-a.local-01");
  // A token issued before placement (a volume id) is not a combined one.
  CHECK_FALSE(decode_list_token("local-0123456789abcdef"));
  CHECK_FALSE(decode_list_token(""));
  CHECK_FALSE(decode_list_token("9.node-a.x"));
}

TEST_CASE("a message's ids are placed and localized at any depth", "[placed_id]") {
  csi::v1::CreateVolumeResponse response;
  response.mutable_volume()->set_volume_id("local-01");
  response.mutable_volume()->mutable_content_source()->mutable_snapshot()->set_snapshot_id(
      "snap-02");
  (*response.mutable_volume()->mutable_volume_context())["volume_id"] = "untouched";
  REQUIRE(place_ids(response, "node-a"));
  CHECK(response.volume().volume_id() == "n6.node-a.local-01");
  CHECK(response.volume().content_source().snapshot().snapshot_id() == "n6.node-a.snap-02");
  CHECK(response.volume().volume_context().at("volume_id") == "untouched");

  csi::v1::CreateVolumeRequest request;
  request.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("n6.node-a.snap-02");
  localize_ids(request, "node-b");  // another node's: left for that node to judge
  CHECK(request.volume_content_source().snapshot().snapshot_id() == "n6.node-a.snap-02");
  localize_ids(request, "node-a");
  CHECK(request.volume_content_source().snapshot().snapshot_id() == "snap-02");
}

TEST_CASE("a node's Catalog answers have their snapshot ids placed, never their commits",
          "[placed_id]") {
  // The controller forwards Catalog calls on a node's snapshots to it (catalog_everywhere.cc):
  // what it passes on must name the node, as a CSI answer's ids do.
  v1::ListSnapshotDetailsResponse response;
  v1::SnapshotDetails* details = response.add_snapshots();
  details->set_id("snap-01");
  details->set_source_volume_id("local-02");
  details->set_parent_id(std::string(64, 'a'));  // a commit id: no node's
  REQUIRE(check_answer_names_its_own(response, "node-a"));
  REQUIRE(place_ids(response, "node-a"));
  CHECK(details->id() == "n6.node-a.snap-01");
  CHECK(details->source_volume_id() == "n6.node-a.local-02");
  CHECK(details->parent_id() == std::string(64, 'a'));
  // A node that calls another node's snapshot its own is not believed.
  CHECK(check_answer_names_its_own(response, "node-a").code() == Code::kDataLoss);
  // Nor one that answers a lookup by name with another node's volume.
  v1::FindVolumeResponse found;
  found.set_volume_id("n6.node-b.local-03");
  CHECK(check_answer_names_its_own(found, "node-a").code() == Code::kDataLoss);
  v1::GetVolumeDetailsResponse details_of;
  details_of.add_volumes()->set_volume_id("n6.node-b.local-03");
  CHECK(check_answer_names_its_own(details_of, "node-a").code() == Code::kDataLoss);
}

}  // namespace
}  // namespace rosetctl
