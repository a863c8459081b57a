// Tests for src/cluster/routing.cc and routing_controller.cc: where a Controller call is answered.
// The decisions alone from requests; then through a plugin (no other host anywhere): a call the
// routing controller sends to node-b, which is registered but cannot be dialled (this plugin has
// no TLS), fails naming node-b, and a call it keeps is answered by this host's controller.
#include "cluster/routing.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "rosetctl.grpc.pb.h"
#include "unit/daemon/plugin_fixture.h"

namespace rosetctl {
namespace {

csi::v1::CreateVolumeRequest create_request(const std::string& name) {
  csi::v1::CreateVolumeRequest request;
  request.set_name(name);
  (*request.mutable_parameters())["provider"] = "local";
  auto* capability = request.add_volume_capabilities();
  capability->mutable_mount();
  capability->mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  return request;
}

void add_topology(google::protobuf::RepeatedPtrField<csi::v1::Topology>* topologies,
                  const std::string& node) {
  (*topologies->Add()->mutable_segments())["topology.rosetctl.io/node"] = node;
}

std::string placed(const std::string& node, const std::string& local_id) {
  auto id = encode_placed_id(node, local_id);
  REQUIRE(id);
  return *id;
}

TEST_CASE("routing: a call goes to the node its placed id names, other than this one",
          "[routing]") {
  CHECK(node_of_id(placed("node-b", "vol-1"), "node-a") == "node-b");
  CHECK_FALSE(node_of_id(placed("node-a", "vol-1"), "node-a"));  // this host's own, placed
  CHECK_FALSE(node_of_id("vol-0123456789abcdef", "node-a"));     // an id this host issued
  CHECK_FALSE(node_of_id("", "node-a"));
}

TEST_CASE("routing: past a cordon, the nodes a create may go to, and its topology narrowed",
          "[routing][cordon]") {
  auto request = create_request("v");
  CHECK(requested_nodes(request.accessibility_requirements()).empty());
  auto* requirement = request.mutable_accessibility_requirements();
  add_topology(requirement->mutable_requisite(), "node-c");
  add_topology(requirement->mutable_requisite(), "node-b");
  add_topology(requirement->mutable_preferred(), "node-b");
  (*requirement->mutable_preferred(0)->mutable_segments())["zone"] = "z1";
  add_topology(requirement->mutable_preferred(), "node-d");
  // Preferred first, then requisite, each node once.
  CHECK(requested_nodes(*requirement) == std::vector<std::string>{"node-b", "node-d", "node-c"});

  auto narrowed = narrowed_to_node(request, "node-b");
  REQUIRE(narrowed.accessibility_requirements().requisite_size() == 1);
  REQUIRE(narrowed.accessibility_requirements().preferred_size() == 1);
  // The topology as the request gave it, zone and all.
  CHECK(narrowed.accessibility_requirements().preferred(0).segments().at("zone") == "z1");
  CHECK(placement_of(narrowed, "node-a") == "node-b");
  CHECK(narrowed.name() == "v");
  CHECK(placement_of(narrowed_to_node(request, "node-c"), "node-a") == "node-c");
  CHECK_FALSE(placement_of(narrowed_to_node(request, "node-a"), "node-a"));  // here

  Status refused = cordoned_error("node-b");
  CHECK(refused.code() == Code::kResourceExhausted);
  CHECK_THAT(refused.message(), Catch::Contains("node \"node-b\" is cordoned") &&
                                    Catch::Contains("rosetctl node uncordon node-b"));
}

TEST_CASE("routing: a create goes to the first node its topology asks for, else its source's",
          "[routing]") {
  auto request = create_request("v");
  CHECK_FALSE(placement_of(request, "node-a"));  // no topology, no source: here

  // Preferred before requisite, and only the first: the same request always goes to one node.
  add_topology(request.mutable_accessibility_requirements()->mutable_requisite(), "node-c");
  CHECK(placement_of(request, "node-a") == "node-c");
  add_topology(request.mutable_accessibility_requirements()->mutable_preferred(), "node-b");
  add_topology(request.mutable_accessibility_requirements()->mutable_preferred(), "node-d");
  CHECK(placement_of(request, "node-a") == "node-b");
  CHECK(requested_node(request.accessibility_requirements()) == "node-b");
  CHECK_FALSE(placement_of(request, "node-b"));  // asked for this host: here

  // Without a topology, a restore goes where its snapshot is.
  auto restore = create_request("r");
  restore.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(
      placed("node-e", "snap-1"));
  CHECK(content_source_node(restore) == "node-e");
  CHECK(placement_of(restore, "node-a") == "node-e");
  add_topology(restore.mutable_accessibility_requirements()->mutable_preferred(), "node-b");
  CHECK(placement_of(restore, "node-a") == "node-b");  // the topology wins: a clone across
  CHECK_FALSE(volume_source_node(restore));            // not a volume: no clone

  auto clone = create_request("c");
  clone.mutable_volume_content_source()->mutable_volume()->set_volume_id(placed("node-f", "v-1"));
  auto source = volume_source_node(clone);
  REQUIRE(source);
  CHECK(source->node == "node-f");
  CHECK(source->local_id == "v-1");
}

TEST_CASE("routing: this host's own source is named for the node it is sent to", "[routing]") {
  auto request = create_request("r");
  request.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-own");
  auto given = place_own_source("node-a", request);
  REQUIRE(given);
  CHECK(*given == "snap-own");
  CHECK(request.volume_content_source().snapshot().snapshot_id() == placed("node-a", "snap-own"));

  // Already placed, or no source: left alone.
  auto again = place_own_source("node-a", request);
  REQUIRE(again);
  CHECK(again->empty());
  CHECK(request.volume_content_source().snapshot().snapshot_id() == placed("node-a", "snap-own"));
  auto empty = create_request("e");
  auto none = place_own_source("node-a", empty);
  REQUIRE(none);
  CHECK(none->empty());
  CHECK_FALSE(empty.has_volume_content_source());
}

TEST_CASE("routing: GetCapacity asks the node its topology names", "[routing]") {
  csi::v1::GetCapacityRequest request;
  CHECK_FALSE(capacity_node(request, "node-a"));
  (*request.mutable_accessible_topology()->mutable_segments())["zone"] = "z1";
  CHECK_FALSE(capacity_node(request, "node-a"));  // no node named: this host says (0)
  (*request.mutable_accessible_topology()->mutable_segments())["topology.rosetctl.io/node"] =
      "node-a";
  CHECK_FALSE(capacity_node(request, "node-a"));
  (*request.mutable_accessible_topology()->mutable_segments())["topology.rosetctl.io/node"] =
      "node-b";
  CHECK(capacity_node(request, "node-a") == "node-b");
}

// A plugin (node-a, no TLS) whose registry holds node-b at an address: whatever is sent to
// node-b fails UNAVAILABLE saying there is no certificate to reach node "node-b" with.
struct Routed : testing::PluginFixture {
  Routed() : PluginFixture("routing") {
    auto registry = v1::Registry::NewStub(plugin->in_process_channel());
    v1::RegisterNodeRequest request;
    request.set_node_id("node-b");
    request.set_address("node-b.example.com:9443");
    grpc::ClientContext context;
    v1::RegisterNodeResponse response;
    REQUIRE(registry->RegisterNode(&context, request, &response).ok());
  }
  static bool sent_to_node_b(const grpc::Status& status) {
    return status.error_code() == grpc::StatusCode::UNAVAILABLE &&
           status.error_message().find("to reach node \"node-b\"") != std::string::npos;
  }
  size_t volumes_here() {
    auto volumes = plugin->store().list_volumes("", 0);
    REQUIRE(volumes);
    return volumes->size();
  }
};

TEST_CASE("routing: a create placed on another node is sent there, not made here", "[routing]") {
  Routed fixture;
  auto request = create_request("placed");
  add_topology(request.mutable_accessibility_requirements()->mutable_preferred(), "node-b");
  csi::v1::CreateVolumeResponse response;
  grpc::ClientContext context;
  auto status = fixture.controller->CreateVolume(&context, request, &response);
  INFO(status.error_message());
  CHECK(Routed::sent_to_node_b(status));
  CHECK(fixture.volumes_here() == 0);

  // A node nobody registered is no place to provision in (CSI: RESOURCE_EXHAUSTED).
  auto unknown = create_request("nowhere");
  add_topology(unknown.mutable_accessibility_requirements()->mutable_preferred(), "node-z");
  grpc::ClientContext context2;
  status = fixture.controller->CreateVolume(&context2, unknown, &response);
  CHECK(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(status.error_message(), Catch::Contains("node \"node-z\" is not registered"));

  // Asked for this host: made here, under an id that names no node.
  auto here = create_request("here");
  add_topology(here.mutable_accessibility_requirements()->mutable_preferred(), "node-a");
  grpc::ClientContext context3;
  status = fixture.controller->CreateVolume(&context3, here, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK_FALSE(decode_placed_id(response.volume().volume_id()));
  CHECK(fixture.volumes_here() == 1);

  // The request's own checks come before placement, wherever it would go.
  auto bad = create_request("bad");
  bad.clear_volume_capabilities();
  add_topology(bad.mutable_accessibility_requirements()->mutable_preferred(), "node-b");
  grpc::ClientContext context4;
  status = fixture.controller->CreateVolume(&context4, bad, &response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(status.error_message(), Catch::Contains("volume_capabilities"));
}

TEST_CASE("routing: calls on another node's ids are sent to it", "[routing]") {
  Routed fixture;
  const std::string volume = placed("node-b", "vol-0123456789abcdef");
  {
    csi::v1::DeleteVolumeRequest request;
    request.set_volume_id(volume);
    csi::v1::DeleteVolumeResponse response;
    grpc::ClientContext context;
    CHECK(Routed::sent_to_node_b(fixture.controller->DeleteVolume(&context, request, &response)));
  }
  {
    csi::v1::ControllerExpandVolumeRequest request;
    request.set_volume_id(volume);
    request.mutable_capacity_range()->set_required_bytes(1 << 20);
    csi::v1::ControllerExpandVolumeResponse response;
    grpc::ClientContext context;
    CHECK(Routed::sent_to_node_b(
        fixture.controller->ControllerExpandVolume(&context, request, &response)));
  }
  {
    csi::v1::ListSnapshotsRequest request;
    request.set_snapshot_id(placed("node-b", "snap-1"));
    csi::v1::ListSnapshotsResponse response;
    grpc::ClientContext context;
    CHECK(Routed::sent_to_node_b(fixture.controller->ListSnapshots(&context, request, &response)));
  }
  {
    // Published to a node this controller does not know: NOT_FOUND from its own registry,
    // before node-b is asked.
    csi::v1::ControllerPublishVolumeRequest request;
    request.set_volume_id(volume);
    request.set_node_id("node-z");
    request.mutable_volume_capability()->mutable_mount();
    csi::v1::ControllerPublishVolumeResponse response;
    grpc::ClientContext context;
    auto status = fixture.controller->ControllerPublishVolume(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::NOT_FOUND);
    CHECK_THAT(status.error_message(), Catch::Contains("node \"node-z\" is not registered"));
    request.set_node_id("node-a");
    grpc::ClientContext context2;
    CHECK(Routed::sent_to_node_b(
        fixture.controller->ControllerPublishVolume(&context2, request, &response)));
  }
  {
    // This host's own placed id stays here: a volume it does not have is NOT_FOUND, not sent.
    csi::v1::ControllerGetVolumeRequest request;
    request.set_volume_id(placed("node-a", "vol-0123456789abcdef"));
    csi::v1::ControllerGetVolumeResponse response;
    grpc::ClientContext context;
    auto status = fixture.controller->ControllerGetVolume(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::NOT_FOUND);
  }
}

TEST_CASE("routing: GetCapacity of another node's topology is that node's", "[routing]") {
  Routed fixture;
  csi::v1::GetCapacityRequest request;
  (*request.mutable_parameters())["provider"] = "local";
  auto& segments = *request.mutable_accessible_topology()->mutable_segments();
  segments["topology.rosetctl.io/node"] = "node-b";
  csi::v1::GetCapacityResponse response;
  grpc::ClientContext context;
  CHECK(Routed::sent_to_node_b(fixture.controller->GetCapacity(&context, request, &response)));

  // Nothing can be provisioned on a node nobody registered, nor in a segment naming no node.
  segments["topology.rosetctl.io/node"] = "node-z";
  grpc::ClientContext context2;
  REQUIRE(fixture.controller->GetCapacity(&context2, request, &response).ok());
  CHECK(response.available_capacity() == 0);
  segments.erase("topology.rosetctl.io/node");
  segments["zone"] = "z1";
  grpc::ClientContext context3;
  REQUIRE(fixture.controller->GetCapacity(&context3, request, &response).ok());
  CHECK(response.available_capacity() == 0);

  segments["topology.rosetctl.io/node"] = "node-a";
  grpc::ClientContext context4;
  REQUIRE(fixture.controller->GetCapacity(&context4, request, &response).ok());
  CHECK(response.available_capacity() > 0);
}

}  // namespace
}  // namespace rosetctl
