// Tests for src/daemon/controller_service.cc through the real in-process gRPC channel:
// idempotency by name, validation naming the field, paging tokens, delete rules.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "cluster/plugin.h"
#include "csi.grpc.pb.h"
#include "unit/daemon/plugin_fixture.h"

namespace {

struct Fixture : rosetctl::testing::PluginFixture {
  Fixture() : PluginFixture("controller") {}

  grpc::Status create(const std::string& name, int64_t bytes, csi::v1::CreateVolumeResponse* out) {
    csi::v1::CreateVolumeRequest request;
    request.set_name(name);
    if (bytes > 0) request.mutable_capacity_range()->set_required_bytes(bytes);
    auto* capability = request.add_volume_capabilities();
    capability->mutable_mount();
    capability->mutable_access_mode()->set_mode(
        csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    grpc::ClientContext context;
    return controller->CreateVolume(&context, request, out);
  }

  // ControllerPublishVolume of `volume_id` to node-a, mounted, single-node writer.
  static csi::v1::ControllerPublishVolumeRequest publish_request(const std::string& volume_id) {
    csi::v1::ControllerPublishVolumeRequest publish;
    publish.set_volume_id(volume_id);
    publish.set_node_id("node-a");
    publish.mutable_volume_capability()->mutable_mount();
    publish.mutable_volume_capability()->mutable_access_mode()->set_mode(
        csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    return publish;
  }
};

}  // namespace

TEST_CASE("CreateVolume is idempotent by name and refuses an incompatible repeat", "[controller]") {
  Fixture f;
  csi::v1::CreateVolumeResponse first, again, bigger;
  REQUIRE(f.create("data", 1 << 20, &first).ok());
  REQUIRE(f.create("data", 1 << 20, &again).ok());
  CHECK(first.volume().volume_id() == again.volume().volume_id());
  CHECK(first.volume().capacity_bytes() == 1 << 20);
  auto status = f.create("data", 2 << 20, &bigger);
  CHECK(status.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(status.error_message().find("data") != std::string::npos);
}

TEST_CASE("CreateVolume names the missing or bad field", "[controller]") {
  Fixture f;
  csi::v1::CreateVolumeResponse response;
  auto no_name = f.create("", 0, &response);
  CHECK(no_name.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(no_name.error_message() == "name is required");

  csi::v1::CreateVolumeRequest no_caps;
  no_caps.set_name("x");
  grpc::ClientContext context;
  auto status = f.controller->CreateVolume(&context, no_caps, &response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() == "volume_capabilities is required");
}

TEST_CASE("ListVolumes pages with tokens and rejects foreign tokens with ABORTED", "[controller]") {
  Fixture f;
  for (int i = 0; i < 7; ++i) {
    csi::v1::CreateVolumeResponse response;
    REQUIRE(f.create("v" + std::to_string(i), 0, &response).ok());
  }
  std::set<std::string> seen;
  csi::v1::ListVolumesRequest request;
  request.set_max_entries(3);
  int pages = 0;
  do {
    csi::v1::ListVolumesResponse response;
    grpc::ClientContext context;
    REQUIRE(f.controller->ListVolumes(&context, request, &response).ok());
    CHECK(response.entries_size() <= 3);
    for (const auto& entry : response.entries())
      seen.insert(entry.volume().volume_id());
    request.set_starting_token(response.next_token());
    ++pages;
  } while (!request.starting_token().empty());
  CHECK(seen.size() == 7);
  CHECK(pages == 3);

  request.set_starting_token("invalid-token");
  csi::v1::ListVolumesResponse response;
  grpc::ClientContext context;
  CHECK(f.controller->ListVolumes(&context, request, &response).error_code() ==
        grpc::StatusCode::ABORTED);
}

TEST_CASE("DeleteVolume of unknown or malformed ids succeeds and published volumes are kept",
          "[controller]") {
  Fixture f;
  for (const char* id : {"local-0000000000000000", "no-such-provider", "../../etc"}) {
    csi::v1::DeleteVolumeRequest request;
    request.set_volume_id(id);
    csi::v1::DeleteVolumeResponse response;
    grpc::ClientContext context;
    CHECK(f.controller->DeleteVolume(&context, request, &response).ok());
  }

  csi::v1::CreateVolumeResponse created;
  REQUIRE(f.create("busy", 0, &created).ok());
  csi::v1::ControllerPublishVolumeRequest publish =
      Fixture::publish_request(created.volume().volume_id());
  csi::v1::ControllerPublishVolumeResponse published;
  grpc::ClientContext publish_context;
  REQUIRE(f.controller->ControllerPublishVolume(&publish_context, publish, &published).ok());

  csi::v1::DeleteVolumeRequest request;
  request.set_volume_id(created.volume().volume_id());
  csi::v1::DeleteVolumeResponse response;
  grpc::ClientContext context;
  CHECK(f.controller->DeleteVolume(&context, request, &response).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);

  publish.set_node_id("node-b");
  grpc::ClientContext unknown_node;
  CHECK(f.controller->ControllerPublishVolume(&unknown_node, publish, &published).error_code() ==
        grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("A repeated ControllerPublish answers as the first; another read-only flag is refused",
          "[controller]") {
  // The publish reads this node's publication from the list of the volume's publications that
  // the access mode's check needs as well (one read instead of two): both answers still hold.
  Fixture f;
  csi::v1::CreateVolumeResponse created;
  REQUIRE(f.create("again", 0, &created).ok());
  csi::v1::ControllerPublishVolumeRequest publish =
      Fixture::publish_request(created.volume().volume_id());
  csi::v1::ControllerPublishVolumeResponse first;
  grpc::ClientContext first_context;
  REQUIRE(f.controller->ControllerPublishVolume(&first_context, publish, &first).ok());
  csi::v1::ControllerPublishVolumeResponse again;
  grpc::ClientContext again_context;
  REQUIRE(f.controller->ControllerPublishVolume(&again_context, publish, &again).ok());
  CHECK(std::map<std::string, std::string>(again.publish_context().begin(),
                                           again.publish_context().end()) ==
        std::map<std::string, std::string>(first.publish_context().begin(),
                                           first.publish_context().end()));
  publish.set_readonly(true);
  grpc::ClientContext readonly_context;
  CHECK(f.controller->ControllerPublishVolume(&readonly_context, publish, &again).error_code() ==
        grpc::StatusCode::ALREADY_EXISTS);
}
