// Tests for src/cluster/node_revocations.cc: which certificates a revocation refuses, and the
// record `node remove --revoke` leaves (src/cluster/registry_service.cc remove_node).
#include "cluster/node_revocations.h"

#include <catch2/catch.hpp>

#include "rosetctl.grpc.pb.h"
#include "unit/daemon/plugin_fixture.h"

using namespace rosetctl;

TEST_CASE("a revocation refuses a node's certificates from up to its time, nobody else's",
          "[revocation]") {
  Peer node{PeerRole::kNode, "node-a", 1000};
  CHECK(check_not_revoked(node, std::nullopt).is_ok());
  CHECK(check_not_revoked(node, 999).is_ok());  // a certificate from after the revocation
  for (int64_t revoked_at : {1000, 5000}) {
    Status refused = check_not_revoked(node, revoked_at);
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.code() == Code::kPermissionDenied);
    CHECK(refused.message().find("node certificate \"node-a\"") != std::string::npos);
    CHECK(refused.message().find("revoked at") != std::string::npos);
    CHECK(refused.message().find("--revoke") != std::string::npos);
  }
  // Only node certificates are revoked this way: an admin of the same name is not.
  CHECK(check_not_revoked(Peer{PeerRole::kAdmin, "node-a", 1000}, 5000).is_ok());
  CHECK(check_not_revoked(Peer{PeerRole::kLocal, "", 0}, 5000).is_ok());
}

TEST_CASE("node remove --revoke records the revocation; a refused request records none",
          "[revocation]") {
  testing::PluginFixture f("revoke");
  auto registry = v1::Registry::NewStub(f.plugin->in_process_channel());
  StateStore& store = f.plugin->store();
  RevocationCheck check = revocation_check_of(store);
  {
    grpc::ClientContext context;
    v1::RemoveNodeRequest request;
    request.set_node_id("never-registered");
    request.set_revoke(true);
    v1::RemoveNodeResponse response;
    REQUIRE(registry->RemoveNode(&context, request, &response).ok());
    CHECK_FALSE(response.removed());
    CHECK(response.revoked_at_unix() > 0);
    auto revoked_at = store.node_certificates_revoked_at("never-registered");
    REQUIRE(revoked_at);
    REQUIRE(revoked_at->has_value());
    CHECK(**revoked_at == response.revoked_at_unix());
    CHECK_FALSE(check(Peer{PeerRole::kNode, "never-registered", **revoked_at - 300}).is_ok());
    CHECK(check(Peer{PeerRole::kNode, "never-registered", **revoked_at + 1}).is_ok());
    CHECK(check(Peer{PeerRole::kNode, "another-node", 0}).is_ok());
  }
  // Revoking again never moves the time back.
  REQUIRE(store.revoke_node_certificates("never-registered", 10).is_ok());
  CHECK(**store.node_certificates_revoked_at("never-registered") > 10);
  {
    grpc::ClientContext context;
    v1::RemoveNodeRequest request;
    request.set_node_id("../bad");
    request.set_revoke(true);
    v1::RemoveNodeResponse response;
    CHECK(registry->RemoveNode(&context, request, &response).error_code() ==
          grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_FALSE(store.node_certificates_revoked_at("../bad")->has_value());
  }
}
