// Tests for src/cluster/registry_service.cc through the real in-process gRPC channel, and for
// what the registry means to ControllerPublishVolume (src/daemon/controller_service.cc).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cluster/plugin.h"
#include "csi.grpc.pb.h"
#include "rosetctl.grpc.pb.h"
#include "unit/daemon/plugin_fixture.h"

namespace {

namespace v1 = rosetctl::v1;

struct Fixture : rosetctl::testing::PluginFixture {
  std::unique_ptr<v1::Registry::Stub> registry;

  Fixture() : PluginFixture("registry") {
    registry = v1::Registry::NewStub(plugin->in_process_channel());
  }

  grpc::Status register_node(const v1::RegisterNodeRequest& request, v1::Node* out = nullptr) {
    grpc::ClientContext context;
    v1::RegisterNodeResponse response;
    grpc::Status status = registry->RegisterNode(&context, request, &response);
    if (out != nullptr) *out = response.node();
    return status;
  }
  grpc::Status remove_node(const std::string& id, bool force, v1::RemoveNodeResponse* out) {
    grpc::ClientContext context;
    v1::RemoveNodeRequest request;
    request.set_node_id(id);
    request.set_force(force);
    return registry->RemoveNode(&context, request, out);
  }
  std::string create_volume(const std::string& name) {
    csi::v1::CreateVolumeRequest request;
    request.set_name(name);
    *request.add_volume_capabilities() = capability();
    csi::v1::CreateVolumeResponse response;
    grpc::ClientContext context;
    REQUIRE(controller->CreateVolume(&context, request, &response).ok());
    return response.volume().volume_id();
  }
  grpc::Status publish(const std::string& volume_id, const std::string& node_id) {
    csi::v1::ControllerPublishVolumeRequest request;
    request.set_volume_id(volume_id);
    request.set_node_id(node_id);
    *request.mutable_volume_capability() = capability();
    csi::v1::ControllerPublishVolumeResponse response;
    grpc::ClientContext context;
    return controller->ControllerPublishVolume(&context, request, &response);
  }
  static csi::v1::VolumeCapability capability() {
    csi::v1::VolumeCapability capability;
    capability.mutable_mount();
    capability.mutable_access_mode()->set_mode(
        csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    return capability;
  }
};

v1::RegisterNodeRequest node_request(const std::string& id) {
  v1::RegisterNodeRequest request;
  request.set_node_id(id);
  // An address of its own: one node each (node-b's shows an IPv6 address kept as given).
  request.set_address(id == "node-b" ? "[fd00::7]:9443" : id + ".example.com:9443");
  request.set_iscsi_initiator("iqn.1993-08.org.debian:01:" + id);
  (*request.mutable_topology())["topology.rosetctl.io/node"] = id;
  request.set_version("0.1.0");
  return request;
}

}  // namespace

TEST_CASE("registry: RegisterNode is idempotent and GetNode, ListNodes show the record",
          "[registry]") {
  Fixture f;
  v1::Node first, again;
  REQUIRE(f.register_node(node_request("node-b"), &first).ok());
  CHECK(first.node_id() == "node-b");
  CHECK(first.address() == "[fd00::7]:9443");
  CHECK(first.registered_at() > 0);
  CHECK(first.last_seen() == first.registered_at());

  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto changed = node_request("node-b");
  changed.set_address("");
  changed.set_version("0.2.0");
  REQUIRE(f.register_node(changed, &again).ok());
  CHECK(again.registered_at() == first.registered_at());
  CHECK(again.last_seen() > first.last_seen());
  // No address named (`node register` without --address): the recorded one stays, so the
  // controller still reaches the node's serve.
  CHECK(again.address() == "[fd00::7]:9443");
  CHECK(again.version() == "0.2.0");

  grpc::ClientContext get_context;
  v1::GetNodeRequest get;
  get.set_node_id("node-b");
  v1::GetNodeResponse got;
  REQUIRE(f.registry->GetNode(&get_context, get, &got).ok());
  CHECK(got.node().SerializeAsString() == again.SerializeAsString());

  REQUIRE(f.register_node(node_request("node-0")).ok());
  grpc::ClientContext list_context;
  v1::ListNodesResponse listed;
  REQUIRE(f.registry->ListNodes(&list_context, v1::ListNodesRequest(), &listed).ok());
  REQUIRE(listed.nodes_size() == 2);
  CHECK(listed.nodes(0).node_id() == "node-0");
  CHECK(listed.nodes(1).node_id() == "node-b");
}

TEST_CASE("registry: bad registrations are INVALID_ARGUMENT naming the field", "[registry]") {
  Fixture f;
  auto bad = [&](auto change, const std::string& says) {
    auto request = node_request("node-b");
    change(request);
    grpc::Status status = f.register_node(request);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains(says));
  };
  bad([](auto& r) { r.set_node_id(""); }, "node_id is required");
  bad([](auto& r) { r.set_node_id("a/b"); }, "node_id \"a/b\"");
  bad([](auto& r) { r.set_address("node-b"); }, "address \"node-b\"");
  bad([](auto& r) { r.set_address("node-b:70000"); }, "has port 70000");
  bad([](auto& r) { r.set_iscsi_initiator("nope"); }, "iscsi_initiator \"nope\"");
  bad([](auto& r) { (*r.mutable_topology())["k"] = "\n"; }, "topology value \"\\x0a\"");
  bad([](auto& r) { r.set_version("1 2"); }, "version \"1 2\"");
  grpc::ClientContext context;
  v1::ListNodesResponse listed;
  REQUIRE(f.registry->ListNodes(&context, v1::ListNodesRequest(), &listed).ok());
  CHECK(listed.nodes_size() == 0);
}

TEST_CASE("registry: an unknown node is NOT_FOUND for GetNode and already removed for RemoveNode",
          "[registry]") {
  Fixture f;
  grpc::ClientContext context;
  v1::GetNodeRequest get;
  get.set_node_id("ghost");
  v1::GetNodeResponse got;
  grpc::Status status = f.registry->GetNode(&context, get, &got);
  CHECK(status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK_THAT(status.error_message(), Catch::Contains("node \"ghost\" is not registered"));
  v1::RemoveNodeResponse removed;
  REQUIRE(f.remove_node("ghost", false, &removed).ok());
  CHECK_FALSE(removed.removed());
}

TEST_CASE("registry: ControllerPublishVolume needs a registered node or this one",
          "[registry][controller]") {
  Fixture f;
  std::string volume = f.create_volume("data");
  CHECK(f.publish(volume, "node-a").ok());  // the plugin's own node needs no registration

  grpc::Status status = f.publish(volume, "node-b");
  CHECK(status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK_THAT(status.error_message(),
             Catch::StartsWith("node \"node-b\" is not registered with this controller"));

  // Registered, node-b is known, but a local volume lives on node-a alone: FAILED_PRECONDITION
  // (the volume cannot reach that node), saying why.
  REQUIRE(f.register_node(node_request("node-b")).ok());
  status = f.publish(volume, "node-b");
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(status.error_message(),
             Catch::Contains("local volumes live on the node that created them and can only be "
                             "published to node \"node-a\""));
  // And names the fix: where to make it instead (issue 32: the error names which host, which flag).
  CHECK_THAT(status.error_message(), Catch::Contains("make it there (volume create --node node-b"));
}

TEST_CASE("registry: RemoveNode refuses a node with publications unless forced", "[registry]") {
  Fixture f;
  REQUIRE(f.register_node(node_request("node-b")).ok());
  std::string volume = f.create_volume("data");
  // A local volume cannot be published to node-b through the controller; the record is what a
  // provider with remote nodes would leave.
  REQUIRE(
      f.plugin->store().upsert_controller_publication({volume, "node-b", false, "c", {}}).is_ok());

  v1::RemoveNodeResponse removed;
  grpc::Status status = f.remove_node("node-b", false, &removed);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(status.error_message(),
             Catch::StartsWith("node \"node-b\" still has volumes published to it: \"data\"; "
                               "unmap them first"));
  CHECK_THAT(status.error_message(), Catch::Contains("rosetctl node remove node-b --force"));

  REQUIRE(f.remove_node("node-b", true, &removed).ok());
  CHECK(removed.removed());
  REQUIRE(removed.published_volume_ids_size() == 1);
  CHECK(removed.published_volume_ids(0) == volume);
  REQUIRE(f.remove_node("node-b", false, &removed).ok());
  CHECK_FALSE(removed.removed());
}

TEST_CASE("registry: an address is one node's, however it is written", "[registry]") {
  Fixture f;
  v1::RegisterNodeRequest a;
  a.set_node_id("node-a");
  a.set_address("192.0.2.3:9444");
  REQUIRE(f.register_node(a).ok());
  for (const char* same : {"192.0.2.3:9444", "192.0.2.3:09444", "[::ffff:192.0.2.3]:9444"}) {
    v1::RegisterNodeRequest b;
    b.set_node_id("node-b");
    b.set_address(same);
    grpc::Status taken = f.register_node(b);
    INFO(same);
    CHECK(taken.error_code() == grpc::StatusCode::ALREADY_EXISTS);
    CHECK_THAT(taken.error_message(), Catch::Contains("registered by node \"node-a\""));
  }
  v1::RegisterNodeRequest c;
  c.set_node_id("node-c");
  c.set_address("Node-C.example.com:9444");
  REQUIRE(f.register_node(c).ok());
  c.set_node_id("node-d");
  c.set_address("node-c.EXAMPLE.com:9444");
  CHECK(f.register_node(c).error_code() == grpc::StatusCode::ALREADY_EXISTS);
  // The node itself may register its address again.
  CHECK(f.register_node(a).ok());
}

TEST_CASE("registry: an initiator name is in lower case and belongs to one node", "[registry]") {
  Fixture f;
  auto node_a = node_request("node-a");
  node_a.set_iscsi_initiator("IQN.1993-08.Org.Debian:01:NODE-A");
  grpc::Status status = f.register_node(node_a);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(status.error_message(),
             Catch::StartsWith("iscsi_initiator \"IQN.1993-08.Org.Debian:01:NODE-A\" is not "
                               "written in lower case"));
  node_a.set_iscsi_initiator("iqn.1993-08.org.debian:01:node-a");
  REQUIRE(f.register_node(node_a).ok());

  // Another node with the same name is refused naming the holder, and nothing is stored for it.
  auto node_b = node_request("node-b");
  node_b.set_iscsi_initiator("iqn.1993-08.org.debian:01:node-a");
  status = f.register_node(node_b);
  CHECK(status.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(status.error_message() ==
        "node \"node-b\" cannot register iscsi_initiator \"iqn.1993-08.org.debian:01:node-a\": "
        "node \"node-a\" holds that name, and two nodes with one name would each get into the "
        "other's volumes; give every host an initiator name of its own (iscsi-iname makes one "
        "for /etc/iscsi/initiatorname.iscsi; restart iscsid after), or remove node \"node-a\" "
        "first (rosetctl node remove node-a)");
  auto found = f.plugin->store().find_node("node-b");
  REQUIRE(found);
  CHECK_FALSE(found->has_value());

  // A row from before names were checked, in capitals, holds the name all the same.
  rosetctl::NodeRecord legacy{"node-old", "", "IQN.1993-08.ORG.DEBIAN:01:OLD", {}, "", 1, 1};
  REQUIRE(f.plugin->store().upsert_node(legacy));
  node_b.set_iscsi_initiator("iqn.1993-08.org.debian:01:old");
  status = f.register_node(node_b);
  CHECK(status.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK_THAT(status.error_message(), Catch::Contains("node \"node-old\" holds that name"));
  // ... and the store refuses a second holder even when asked directly.
  rosetctl::NodeRecord sneaked{"node-b", "", "iqn.1993-08.org.debian:01:old", {}, "", 1, 1};
  auto stored = f.plugin->store().upsert_node(sneaked);
  REQUIRE(!stored);
  CHECK(stored.status().code() == rosetctl::Code::kAlreadyExists);
  // The legacy node registering again in lower case is the same initiator: no conflict.
  auto old = node_request("node-old");
  old.set_iscsi_initiator("iqn.1993-08.org.debian:01:old");
  v1::Node again;
  REQUIRE(f.register_node(old, &again).ok());
  CHECK(again.iscsi_initiator() == "iqn.1993-08.org.debian:01:old");

  // node-a takes a new name: the old one is free, and its publications moved (the local
  // provider has no ACLs: mapping is a no-op there, and the record is what changes).
  std::string volume = f.create_volume("data");
  REQUIRE(
      f.plugin->store().upsert_controller_publication({volume, "node-a", false, "c", {}}).is_ok());
  node_a.set_iscsi_initiator("iqn.1993-08.org.debian:01:node-a-new");
  v1::Node moved;
  REQUIRE(f.register_node(node_a, &moved).ok());
  CHECK(moved.iscsi_initiator() == "iqn.1993-08.org.debian:01:node-a-new");
  node_b.set_iscsi_initiator("iqn.1993-08.org.debian:01:node-a");
  v1::Node taken;
  REQUIRE(f.register_node(node_b, &taken).ok());
  CHECK(taken.iscsi_initiator() == "iqn.1993-08.org.debian:01:node-a");

  // Nodes without a name never conflict.
  for (const char* id : {"node-c", "node-d"}) {
    auto nameless = node_request(id);
    nameless.set_iscsi_initiator("");
    CHECK(f.register_node(nameless).ok());
  }
}

TEST_CASE("registry: a registration that moves a node's name waits for its publications",
          "[registry]") {
  Fixture f;
  REQUIRE(f.register_node(node_request("node-b")).ok());
  // A ControllerPublishVolume to node-b in flight holds the node's lock shared (a lock space of
  // its own on the same file: its locks conflict with the plugin's, as another process's would).
  auto locks = rosetctl::LockSpace::open(f.plugin->layout().lock_file());
  REQUIRE(locks);
  auto held = locks->try_lock("node:node-b", rosetctl::LockMode::kShared, "busy");
  REQUIRE(held);
  auto moved = node_request("node-b");
  moved.set_iscsi_initiator("iqn.1993-08.org.debian:01:elsewhere");
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    *held = rosetctl::HeldLock();
  });
  auto started = std::chrono::steady_clock::now();
  v1::Node stored;
  grpc::Status status = f.register_node(moved, &stored);
  release.join();
  CHECK(status.ok());
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(250));
  CHECK(stored.iscsi_initiator() == "iqn.1993-08.org.debian:01:elsewhere");
  // A heartbeat that changes nothing takes no lock.
  held = locks->try_lock("node:node-b", rosetctl::LockMode::kShared, "busy");
  REQUIRE(held);
  CHECK(f.register_node(moved).ok());
}

namespace {

grpc::Status cordon(Fixture& f, const std::string& id, bool cordoned, v1::CordonNodeResponse* out) {
  grpc::ClientContext context;
  v1::CordonNodeRequest request;
  request.set_node_id(id);
  request.set_cordoned(cordoned);
  return f.registry->CordonNode(&context, request, out);
}

grpc::Status create_on(Fixture& f, const std::string& name, const std::vector<std::string>& nodes,
                       csi::v1::CreateVolumeResponse* response) {
  csi::v1::CreateVolumeRequest request;
  request.set_name(name);
  *request.add_volume_capabilities() = Fixture::capability();
  for (const std::string& node : nodes) {
    (*request.mutable_accessibility_requirements()
          ->add_preferred()
          ->mutable_segments())["topology.rosetctl.io/node"] = node;
  }
  grpc::ClientContext context;
  return f.controller->CreateVolume(&context, request, response);
}

}  // namespace

TEST_CASE("registry: a cordon is idempotent, kept across registrations, and lifted",
          "[registry][cordon]") {
  Fixture f;
  v1::CordonNodeResponse response;
  grpc::Status unknown = cordon(f, "node-b", true, &response);
  CHECK(unknown.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK_THAT(unknown.error_message(), Catch::Contains("node \"node-b\" is not registered"));

  v1::RegisterNodeRequest registration;
  registration.set_node_id("node-b");
  registration.set_version("0.1.0");
  REQUIRE(f.register_node(registration).ok());
  REQUIRE(cordon(f, "node-b", true, &response).ok());
  CHECK(response.changed());
  const int64_t since = response.node().cordoned_at();
  CHECK(since > 0);
  REQUIRE(cordon(f, "node-b", true, &response).ok());
  CHECK_FALSE(response.changed());
  CHECK(response.node().cordoned_at() == since);
  v1::Node registered;
  REQUIRE(f.register_node(registration, &registered).ok());  // its heartbeat
  CHECK(registered.cordoned_at() == since);

  // Placed on it: refused with the spec's code for a topology that cannot be met, unless the
  // topology allows another node (here the plugin's own, node-a).
  csi::v1::CreateVolumeResponse made;
  grpc::Status refused = create_on(f, "late", {"node-b"}, &made);
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(refused.error_message(), Catch::Contains("node \"node-b\" is cordoned") &&
                                          Catch::Contains("rosetctl node uncordon node-b"));
  REQUIRE(create_on(f, "either", {"node-b", "node-a"}, &made).ok());
  CHECK(made.volume().volume_id().find("node-b") == std::string::npos);

  REQUIRE(cordon(f, "node-b", false, &response).ok());
  CHECK(response.changed());
  CHECK(response.node().cordoned_at() == 0);
  REQUIRE(cordon(f, "node-b", false, &response).ok());
  CHECK_FALSE(response.changed());
}
