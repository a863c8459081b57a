// Tests for src/daemon/peer_authority.cc: roles from certificate subjects, and what each may do.
// The auth context of a real TLS call is exercised by tests/integration/test_across_hosts.py;
// here the rules are checked over the in-process channel (a local caller) and by subject.
#include "daemon/peer_authority.h"

#include <grpcpp/server_context.h>

#include <catch2/catch.hpp>

#include "rosetctl.pb.h"

using rosetctl::Peer;
using rosetctl::peer_from_subject;
using rosetctl::PeerRole;

TEST_CASE("peer_authority: the role is the subject's OU and the name its CN", "[peer]") {
  Peer node = peer_from_subject("CN=node-a,OU=node,O=rosetctl");
  CHECK(node.role == PeerRole::kNode);
  CHECK(node.name == "node-a");
  CHECK(node.log_field() == "node:node-a");
  CHECK(peer_from_subject("O=rosetctl, OU=admin, CN=alice").role == PeerRole::kAdmin);
  CHECK(peer_from_subject("CN=ctl,OU=controller,O=rosetctl").role == PeerRole::kController);
  // The CA's OU, another organisation's, or none: no rosetctl role.
  CHECK(peer_from_subject("CN=rosetctl CA 00,OU=ca,O=rosetctl").role == PeerRole::kUnknown);
  CHECK(peer_from_subject("CN=x,OU=nodes,O=other").role == PeerRole::kUnknown);
  CHECK(peer_from_subject("CN=x").role == PeerRole::kUnknown);
  // An attribute whose name merely starts like OU or CN is not it.
  Peer tricky = peer_from_subject("OUX=admin,CNAME=admin,OU=node,CN=node-b");
  CHECK(tricky.role == PeerRole::kNode);
  CHECK(tricky.name == "node-b");
}

TEST_CASE("peer_authority: descriptions name the certificate", "[peer]") {
  CHECK(Peer{PeerRole::kNode, "node-a"}.describe() == "node certificate \"node-a\"");
  CHECK(Peer{PeerRole::kAdmin, "alice"}.describe() == "admin certificate \"alice\"");
  CHECK(Peer{}.describe() == "a local caller");
  // A hostile CN stays on one line in logs and messages.
  Peer hostile{PeerRole::kNode, "a\nb"};
  CHECK(hostile.describe().find('\n') == std::string::npos);
  CHECK(hostile.log_field().find('\n') == std::string::npos);
}

TEST_CASE("peer_authority: a node certificate asks only its own node's NodeState", "[peer]") {
  grpc::ServerContext call;  // no metadata: not proxied
  Peer node{PeerRole::kNode, "node-a"};
  rosetctl::v1::GetNodeVolumesRequest facts;
  facts.set_node_id("node-a");
  CHECK(rosetctl::authorize(node, call, "GetNodeVolumes", facts).is_ok());
  facts.set_node_id("node-b");
  rosetctl::Status refused = rosetctl::authorize(node, call, "GetNodeVolumes", facts);
  CHECK(refused.code() == rosetctl::Code::kPermissionDenied);
  CHECK_THAT(refused.message(), Catch::Contains("node certificate \"node-a\" may not call "
                                                "GetNodeVolumes for node \"node-b\""));
  rosetctl::v1::HoldAttachLockRequest lock;
  lock.set_volume_id("local-v1");  // no node: every node, which a node may not ask for
  CHECK(rosetctl::authorize(node, call, "HoldAttachLock", lock).code() ==
        rosetctl::Code::kPermissionDenied);
  lock.set_node_id("node-b");
  CHECK(rosetctl::authorize(Peer{PeerRole::kAdmin, "alice"}, call, "HoldAttachLock", lock).is_ok());
  CHECK(rosetctl::authorize(Peer{}, call, "HoldAttachLock", lock).is_ok());
}

TEST_CASE("peer_authority: a node reads another node's objects but never pulls into it", "[peer]") {
  Peer node{PeerRole::kNode, "node-b"};
  for (const char* reading :
       {"/rosetctl.v1.ObjectStore/LookupSnapshot", "/rosetctl.v1.ObjectStore/FetchObjects"}) {
    CHECK(rosetctl::authorize_forward(node, reading, "node-a").is_ok());
  }
  rosetctl::Status refused =
      rosetctl::authorize_forward(node, "/rosetctl.v1.ObjectStore/PullSnapshot", "node-a");
  CHECK(refused.code() == rosetctl::Code::kPermissionDenied);
  CHECK_THAT(refused.message(), Catch::Contains("node certificate \"node-b\""));
  CHECK(
      rosetctl::authorize_forward(node, "/rosetctl.v1.ObjectStore/PullSnapshot", "node-b").is_ok());
  // The rest of a node's calls stay its own.
  CHECK(
      rosetctl::authorize_forward(node, "/rosetctl.v1.NodeState/GetNodeVolumes", "node-a").code() ==
      rosetctl::Code::kPermissionDenied);

  grpc::ServerContext call;  // PullSnapshot's request names the node it writes into
  rosetctl::v1::PullSnapshotRequest pull;
  pull.set_node_id("node-a");
  pull.set_from_node_id("node-b");
  CHECK(rosetctl::authorize(node, call, "PullSnapshot", pull).code() ==
        rosetctl::Code::kPermissionDenied);
  pull.set_node_id("node-b");
  pull.set_from_node_id("node-a");
  CHECK(rosetctl::authorize(node, call, "PullSnapshot", pull).is_ok());
}
