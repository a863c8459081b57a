// Tests for src/daemon/node_state_service.cc through the real in-process gRPC channel: what a
// node answers of its volumes and targets, and its attach lock held across a streaming call.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <future>

#include "rosetctl.grpc.pb.h"
#include "unit/daemon/plugin_fixture.h"

namespace {

namespace v1 = rosetctl::v1;
using namespace std::chrono_literals;

struct Fixture : rosetctl::testing::PluginFixture {
  std::unique_ptr<v1::NodeState::Stub> node_state;

  Fixture() : PluginFixture("node-state") {
    node_state = v1::NodeState::NewStub(plugin->in_process_channel());
  }

  grpc::Status resolve(v1::ResolveTargetRequest request, v1::ResolveTargetResponse* response) {
    if (request.node_id().empty()) request.set_node_id("node-a");
    if (request.volume_id().empty()) request.set_volume_id("local-v1");
    grpc::ClientContext context;
    return node_state->ResolveTarget(&context, request, response);
  }
};

// One HoldAttachLock call, kept open until the object goes.
struct Holder {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::HoldAttachLockResponse>> reader;

  Holder(v1::NodeState::Stub& stub, const std::string& volume_id) {
    v1::HoldAttachLockRequest request;
    request.set_node_id("node-a");
    request.set_volume_id(volume_id);
    reader = stub.HoldAttachLock(&context, request);
  }
  ~Holder() {
    context.TryCancel();
    (void)reader->Finish();
  }
  // The next message, or nullopt when the call ended.
  std::optional<v1::HoldAttachLockResponse> next() {
    v1::HoldAttachLockResponse message;
    if (!reader->Read(&message)) return std::nullopt;
    return message;
  }
};

}  // namespace

TEST_CASE("GetNodeVolumes answers this node's records and where connect stages", "[node_state]") {
  Fixture f;
  v1::GetNodeVolumesRequest request;
  request.set_node_id("node-a");
  request.add_volume_ids("local-v1");
  request.add_volume_ids("local-v2");
  v1::GetNodeVolumesResponse response;
  {
    grpc::ClientContext context;
    REQUIRE(f.node_state->GetNodeVolumes(&context, request, &response).ok());
  }
  REQUIRE(response.volumes_size() == 2);
  std::string staging = std::filesystem::canonical(f.dir).string() + "/state/staging/";
  for (int i = 0; i < 2; ++i) {
    const v1::NodeVolume& volume = response.volumes(i);
    CHECK(volume.volume_id() == request.volume_ids(i));
    CHECK(volume.publications().empty());
    CHECK(volume.stagings().empty());
    CHECK(volume.own_staging_path() == staging + request.volume_ids(i));
  }

  request.add_volume_ids("../escape");
  grpc::ClientContext context;
  CHECK(f.node_state->GetNodeVolumes(&context, request, &response).error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("NodeState refuses a request meant for another node", "[node_state]") {
  Fixture f;
  v1::GetNodeVolumesRequest request;
  request.set_node_id("node-b");
  request.add_volume_ids("local-v1");
  v1::GetNodeVolumesResponse response;
  grpc::ClientContext context;
  grpc::Status status = f.node_state->GetNodeVolumes(&context, request, &response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(status.error_message(), Catch::Contains("\"node-b\" is not this node (\"node-a\")"));

  Holder other(*f.node_state, "local-v1");
  v1::HoldAttachLockRequest wrong;
  wrong.set_node_id("node-b");
  wrong.set_volume_id("local-v1");
  grpc::ClientContext lock_context;
  auto reader = f.node_state->HoldAttachLock(&lock_context, wrong);
  v1::HoldAttachLockResponse message;
  CHECK_FALSE(reader->Read(&message));
  CHECK(reader->Finish().error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("ResolveTarget resolves, defaults and checks targets as NodePublish will",
          "[node_state]") {
  Fixture f;
  std::string root = std::filesystem::canonical(f.dir).string();
  std::filesystem::create_directories(root + "/somewhere/full");
  std::filesystem::create_directory_symlink(root + "/somewhere", root + "/link");
  {
    v1::ResolveTargetRequest request;
    request.set_path(root + "/link/./data");
    v1::ResolveTargetResponse response;
    REQUIRE(f.resolve(request, &response).ok());
    CHECK(response.path() == root + "/somewhere/data");
    CHECK_FALSE(response.already_published());
  }
  {
    v1::ResolveTargetRequest request;
    request.set_volume_name("demo");
    v1::ResolveTargetResponse response;
    REQUIRE(f.resolve(request, &response).ok());
    CHECK(response.path() == root + "/state/mnt/demo");
  }
  {
    v1::ResolveTargetRequest request;
    request.set_path(root + "/missing/data");
    request.set_shown_as("missing/data");
    v1::ResolveTargetResponse response;
    grpc::Status status = f.resolve(request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(),
               Catch::Contains("--target \"missing/data\": directory \"" + root +
                               "/missing\" "
                               "does not exist"));
  }
  {
    v1::ResolveTargetRequest request;
    request.set_path(root + "/state/volumes");
    v1::ResolveTargetResponse response;
    grpc::Status status = f.resolve(request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("inside (or contains) the rosetctl state"));
  }
  {
    // A non-empty directory: fine to name (disconnect), refused for a connect (check).
    std::filesystem::create_directory(root + "/somewhere/full/file");
    v1::ResolveTargetRequest request;
    request.set_path(root + "/somewhere/full");
    v1::ResolveTargetResponse response;
    REQUIRE(f.resolve(request, &response).ok());
    request.set_check(true);
    CHECK(f.resolve(request, &response).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    v1::ResolveTargetRequest request;
    request.set_path("relative/path");
    v1::ResolveTargetResponse response;
    CHECK(f.resolve(request, &response).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST_CASE("HoldAttachLock holds until the call ends; a second caller waits its turn",
          "[node_state]") {
  Fixture f;
  auto first = std::make_unique<Holder>(*f.node_state, "local-v1");
  auto answer = first->next();
  REQUIRE(answer.has_value());
  CHECK(answer->held());

  // Another volume's lock is another lock.
  Holder unrelated(*f.node_state, "local-v2");
  auto unrelated_answer = unrelated.next();
  REQUIRE(unrelated_answer.has_value());
  CHECK(unrelated_answer->held());

  Holder second(*f.node_state, "local-v1");
  auto waiting = second.next();
  REQUIRE(waiting.has_value());
  CHECK_FALSE(waiting->held());
  CHECK(waiting->waiting() ==
        "another rosetctl run is connecting or disconnecting volume \"local-v1\"");
  // Still waiting while the first call is open.
  auto turn = std::async(std::launch::async, [&] { return second.next(); });
  CHECK(turn.wait_for(300ms) == std::future_status::timeout);
  first.reset();  // ends the call: the node releases the lock
  REQUIRE(turn.wait_for(5s) == std::future_status::ready);
  auto held = turn.get();
  REQUIRE(held.has_value());
  CHECK(held->held());
}
