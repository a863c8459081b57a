// Tests for src/cluster/authorization.cc and authorization_table.cc: the decision for each kind of
// caller and server, peers read from certificates, and the table against the services served
// and against docs/SECURITY.md. The interceptor on real TLS calls is tests/security/'s.
#include "cluster/authorization.h"

#include <google/protobuf/descriptor.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "cluster/authorization_table.h"
#include "cluster/peer_authority.h"
#include "cluster/placed_fields.h"
#include "csi.pb.h"
#include "rosetctl.pb.h"

namespace {

using rosetctl::AnsweringServer;
using rosetctl::CallToDecide;
using rosetctl::Code;
using rosetctl::decide;
using rosetctl::Peer;
using rosetctl::PeerRole;

const AnsweringServer kController{.node_id = "ctl", .controller = true, .node = false};
const AnsweringServer kAll{.node_id = "ctl", .controller = true, .node = true};
const AnsweringServer kNodeA{.node_id = "node-a", .controller = false, .node = true};
const AnsweringServer kNodeB{.node_id = "node-b", .controller = false, .node = true};

const Peer kLocal{};
const Peer kAdmin{PeerRole::kAdmin, "alice"};
const Peer kControllerPeer{PeerRole::kController, "ctl"};
const Peer kNodeAPeer{PeerRole::kNode, "node-a"};
const Peer kUnknown{PeerRole::kUnknown, "x"};

Code code_of(const AnsweringServer& server, const Peer& peer, std::string_view method,
             const google::protobuf::Message* request,
             std::optional<std::string_view> forwarded_to = std::nullopt) {
  return decide(server, CallToDecide{peer, method, request, forwarded_to}).code();
}

// The services rosetctl serves, by their full names.
const std::set<std::string> kServed = {
    "csi.v1.Identity",         "csi.v1.Controller",     "csi.v1.Node",
    "rosetctl.v1.Registry",    "rosetctl.v1.Catalog",   "rosetctl.v1.NodeState",
    "rosetctl.v1.ObjectStore", "rosetctl.v1.Enrollment"};

}  // namespace

TEST_CASE("authorization: the table has every method served, and nothing else", "[authz]") {
  // Make sure the generated files' descriptors are in the pool.
  (void)csi::v1::CreateVolumeRequest::descriptor();
  (void)rosetctl::v1::RegisterNodeRequest::descriptor();
  std::set<std::string> served;
  for (const std::string& name : kServed) {
    const auto* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    REQUIRE(service != nullptr);
    for (int i = 0; i < service->method_count(); ++i)
      served.insert("/" + name + "/" + service->method(i)->name());
  }
  std::set<std::string> listed;
  for (const auto& entry : rosetctl::authorization_table())
    listed.insert(std::string(entry.method));
  CHECK(listed == served);
  CHECK(listed.size() == rosetctl::authorization_table().size());  // no entry twice
}

TEST_CASE("authorization: docs/SECURITY.md prints the table as the code has it", "[authz]") {
  std::ifstream in(std::string(ROSETCTL_SOURCE_DIR) + "/docs/SECURITY.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::string begin = "<!-- authorization table: generated -->\n";
  const std::string end = "<!-- end of the authorization table -->";
  auto from = doc.find(begin);
  auto to = doc.find(end);
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  std::string printed = doc.substr(from + begin.size(), to - from - begin.size());
  INFO("replace the table in docs/SECURITY.md with:\n" << rosetctl::authorization_table_markdown());
  CHECK(printed == rosetctl::authorization_table_markdown());
}

TEST_CASE("authorization: a method not in the table is refused to everyone", "[authz]") {
  csi::v1::ProbeRequest probe;
  // This host's callers get what gRPC says of a method nobody serves; nothing runs either way.
  CHECK(code_of(kAll, kLocal, "/csi.v1.GroupController/CreateVolumeGroupSnapshot", &probe) ==
        Code::kUnimplemented);
  CHECK(code_of(kAll, kAdmin, "/grpc.health.v1.Health/Check", nullptr) == Code::kPermissionDenied);
  // This host and every role may make the calls the table lets them.
  CHECK(code_of(kAll, kLocal, "/csi.v1.Identity/Probe", &probe) == Code::kOk);
  CHECK(code_of(kNodeA, kNodeAPeer, "/csi.v1.Identity/Probe", &probe) == Code::kOk);
  CHECK(code_of(kNodeA, kUnknown, "/csi.v1.Identity/Probe", &probe) == Code::kPermissionDenied);
}

TEST_CASE("authorization: a node's certificate acts on its own node alone", "[authz]") {
  csi::v1::NodeUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id("local-v1");
  unpublish.set_target_path("/var/lib/kubelet/pods/x/mount");
  const char* method = "/csi.v1.Node/NodeUnpublishVolume";
  CHECK(code_of(kNodeA, kNodeAPeer, method, &unpublish) == Code::kOk);
  // Issue 31 row 1: node-a's certificate at node-b's own listener.
  rosetctl::Status refused = decide(kNodeB, CallToDecide{kNodeAPeer, method, &unpublish, {}});
  CHECK(refused.code() == Code::kPermissionDenied);
  CHECK_THAT(refused.message(),
             Catch::Contains("node certificate \"node-a\" may not call "
                             "/csi.v1.Node/NodeUnpublishVolume on node \"node-b\""));
  // The controller and admins may (the controller forwards an admin's --on-node calls).
  CHECK(code_of(kNodeB, kControllerPeer, method, &unpublish) == Code::kOk);
  CHECK(code_of(kNodeB, kAdmin, method, &unpublish) == Code::kOk);
  // Through a controller's proxy: the node forwarded to must be the caller.
  CHECK(code_of(kController, kNodeAPeer, method, nullptr, "node-b") == Code::kPermissionDenied);
  CHECK(code_of(kController, kNodeAPeer, method, nullptr, "node-a") == Code::kOk);
  // Metadata naming another node is refused even on a call it would not forward.
  csi::v1::ListVolumesRequest list;
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/ListVolumes", &list, "node-b") ==
        Code::kPermissionDenied);
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/ListVolumes", &list, "node-a") ==
        Code::kOk);
  // A role-all host's own node is not a node certificate's either.
  CHECK(code_of(kAll, kNodeAPeer, method, &unpublish) == Code::kPermissionDenied);
  // A placed id naming another node inside a call to itself.
  unpublish.set_volume_id("n6.node-b.local-v1");
  CHECK(code_of(kNodeA, kNodeAPeer, method, &unpublish) == Code::kPermissionDenied);
}

TEST_CASE("authorization: NodeState and PullSnapshot name their node", "[authz]") {
  rosetctl::v1::GetNodeVolumesRequest facts;
  facts.set_node_id("node-a");
  const char* method = "/rosetctl.v1.NodeState/GetNodeVolumes";
  CHECK(code_of(kNodeA, kNodeAPeer, method, &facts) == Code::kOk);
  facts.set_node_id("node-b");
  CHECK(code_of(kNodeA, kNodeAPeer, method, &facts) == Code::kPermissionDenied);
  facts.set_node_id("");  // every node: not a node's to ask
  CHECK(code_of(kNodeA, kNodeAPeer, method, &facts) == Code::kPermissionDenied);

  rosetctl::v1::PullSnapshotRequest pull;
  pull.set_node_id("node-a");
  pull.set_from_node_id("node-b");
  CHECK(code_of(kNodeA, kNodeAPeer, "/rosetctl.v1.ObjectStore/PullSnapshot", &pull) == Code::kOk);
  CHECK(code_of(kController, kNodeAPeer, "/rosetctl.v1.ObjectStore/PullSnapshot", nullptr,
                "node-b") == Code::kPermissionDenied);
}

TEST_CASE("authorization: a node reads another node's store only carrying a transfer grant",
          "[authz]") {
  rosetctl::v1::LookupSnapshotRequest lookup;
  lookup.set_reference("snap-1");
  const char* method = "/rosetctl.v1.ObjectStore/LookupSnapshot";
  auto decided = [&](const AnsweringServer& server, const Peer& peer, bool carries_grant,
                     std::optional<std::string_view> forwarded_to = std::nullopt) {
    return decide(server, CallToDecide{peer, method, &lookup, forwarded_to, carries_grant});
  };
  // Issue 31, item 1: node-a's certificate at node-b's listener, or through the proxy to it.
  rosetctl::Status refused = decided(kNodeB, kNodeAPeer, false);
  CHECK(refused.code() == Code::kPermissionDenied);
  CHECK_THAT(refused.message(), Catch::Contains("may not call " + std::string(method)) &&
                                    Catch::Contains("carries no transfer grant") &&
                                    Catch::Contains("snapshot pull SNAPSHOT --from-node SOURCE"));
  CHECK(decided(kController, kNodeAPeer, false, "node-b").code() == Code::kPermissionDenied);
  CHECK(decided(kAll, kNodeAPeer, false).code() == Code::kPermissionDenied);
  // With a grant the call goes on, to be held to it where the grant is known (granted_reads.h).
  CHECK(decided(kNodeB, kNodeAPeer, true).is_ok());
  CHECK(decided(kController, kNodeAPeer, true, "node-b").is_ok());
  // Its own store, and the controller's and admins' reads, need none.
  CHECK(decided(kNodeA, kNodeAPeer, false).is_ok());
  CHECK(decided(kNodeB, kControllerPeer, false).is_ok());
  CHECK(decided(kNodeB, kAdmin, false).is_ok());
  // FetchObjects alike.
  rosetctl::v1::FetchObjectsRequest fetch;
  CHECK(decide(kNodeB, CallToDecide{kNodeAPeer, "/rosetctl.v1.ObjectStore/FetchObjects", &fetch,
                                    std::nullopt, false})
            .code() == Code::kPermissionDenied);
  // The source asks its controller about a grant of its own store, and no other node's.
  rosetctl::v1::CheckTransferGrantRequest check;
  check.set_node_id("node-a");
  const char* check_method = "/rosetctl.v1.Registry/CheckTransferGrant";
  CHECK(code_of(kController, kNodeAPeer, check_method, &check) == Code::kOk);
  check.set_node_id("node-b");
  CHECK(code_of(kController, kNodeAPeer, check_method, &check) == Code::kPermissionDenied);
}

TEST_CASE("authorization: a node manages the controller host's volumes and its own", "[authz]") {
  csi::v1::DeleteVolumeRequest remove;
  const char* method = "/csi.v1.Controller/DeleteVolume";
  remove.set_volume_id("local-v1");  // the controller host's
  CHECK(code_of(kController, kNodeAPeer, method, &remove) == Code::kOk);
  remove.set_volume_id("n6.node-a.local-v1");
  CHECK(code_of(kController, kNodeAPeer, method, &remove) == Code::kOk);
  remove.set_volume_id("n3.ctl.local-v1");  // the controller host's, placed-id form
  CHECK(code_of(kController, kNodeAPeer, method, &remove) == Code::kOk);
  // Issue 31 row 3: another node's volume, snapshot, placement, clone.
  remove.set_volume_id("n6.node-b.local-v1");
  rosetctl::Status refused = decide(kController, CallToDecide{kNodeAPeer, method, &remove, {}});
  CHECK(refused.code() == Code::kPermissionDenied);
  CHECK_THAT(refused.message(), Catch::Contains("for node \"node-b\""));
  csi::v1::DeleteSnapshotRequest snapshot;
  snapshot.set_snapshot_id("n6.node-b.snap-1");
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/DeleteSnapshot", &snapshot) ==
        Code::kPermissionDenied);
  csi::v1::CreateVolumeRequest create;
  create.set_name("v");
  (*create.mutable_accessibility_requirements()
        ->add_preferred()
        ->mutable_segments())["topology.rosetctl.io/node"] = "node-b";
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/CreateVolume", &create) ==
        Code::kPermissionDenied);
  CHECK(code_of(kController, kAdmin, "/csi.v1.Controller/CreateVolume", &create) == Code::kOk);
  create.clear_accessibility_requirements();
  create.mutable_volume_content_source()->mutable_volume()->set_volume_id("n6.node-b.local-v1");
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/CreateVolume", &create) ==
        Code::kPermissionDenied);
  csi::v1::ControllerPublishVolumeRequest publish;
  publish.set_volume_id("local-v1");
  publish.set_node_id("node-b");
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/ControllerPublishVolume", &publish) ==
        Code::kPermissionDenied);
  publish.set_node_id("node-a");
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/ControllerPublishVolume", &publish) ==
        Code::kOk);
}

TEST_CASE("authorization: a node acts for itself, not for the controller host", "[authz]") {
  // The controller host's volumes are every consumer's, its node entry and publications not.
  rosetctl::v1::RegisterNodeRequest registration;
  registration.set_node_id("ctl");
  CHECK(code_of(kController, kNodeAPeer, "/rosetctl.v1.Registry/RegisterNode", &registration) ==
        Code::kPermissionDenied);
  csi::v1::ControllerPublishVolumeRequest publish;
  publish.set_volume_id("local-v1");
  publish.set_node_id("ctl");
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/ControllerPublishVolume", &publish) ==
        Code::kPermissionDenied);
  // An id wrapped in the controller host's names the node inside too.
  csi::v1::DeleteVolumeRequest remove;
  remove.set_volume_id("n3.ctl.n6.node-b.local-v1");
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/DeleteVolume", &remove) ==
        Code::kPermissionDenied);
  // A combined list's token goes on at the node it names.
  csi::v1::ListVolumesRequest list;
  list.set_starting_token("6.node-b.");
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/ListVolumes", &list) ==
        Code::kPermissionDenied);
  list.set_starting_token("6.node-a.");
  CHECK(code_of(kController, kNodeAPeer, "/csi.v1.Controller/ListVolumes", &list) == Code::kOk);
  // Re-reading the controller host's whole store is an operator's call.
  rosetctl::v1::VerifySnapshotsRequest verify;
  rosetctl::Status refused = decide(
      kController, CallToDecide{kNodeAPeer, "/rosetctl.v1.Catalog/VerifySnapshots", &verify, {}});
  CHECK(refused.code() == Code::kPermissionDenied);
  // The refusal names the fix: whose certificate may (the seat matrix's node row).
  CHECK_THAT(refused.message(),
             Catch::EndsWith("that role may not make it on a controller; an admin's or a "
                             "controller's certificate may"));
  // A node's Controller service answers no admin: the refusal says who it does answer.
  csi::v1::CreateVolumeRequest create;
  create.set_name("v");
  CHECK_THAT(decide(kNodeA, CallToDecide{kAdmin, "/csi.v1.Controller/CreateVolume", &create, {}})
                 .message(),
             Catch::EndsWith("that role may not make it on a node; a controller's certificate "
                             "may"));
}

TEST_CASE("authorization: a node's answer names only its own volumes and snapshots", "[authz]") {
  csi::v1::CreateSnapshotResponse snapshot;
  snapshot.mutable_snapshot()->set_snapshot_id("snap-1");
  snapshot.mutable_snapshot()->set_source_volume_id("n6.node-a.local-v1");  // may name a node
  CHECK(rosetctl::check_answer_names_its_own(snapshot, "evil").is_ok());
  snapshot.mutable_snapshot()->set_snapshot_id("n6.node-b.snap-1");
  rosetctl::Status lie = rosetctl::check_answer_names_its_own(snapshot, "evil");
  CHECK(lie.code() == Code::kDataLoss);
  CHECK_THAT(lie.message(), Catch::Contains("node \"evil\" answered with snapshot_id"));
  csi::v1::ListVolumesResponse list;
  list.add_entries()->mutable_volume()->set_volume_id("local-1");
  CHECK(rosetctl::check_answer_names_its_own(list, "evil").is_ok());
  list.add_entries()->mutable_volume()->set_volume_id("n6.node-b.local-2");
  CHECK(rosetctl::check_answer_names_its_own(list, "evil").code() == Code::kDataLoss);
}

TEST_CASE("authorization: a node's Controller service answers its controller alone", "[authz]") {
  csi::v1::CreateVolumeRequest create;
  create.set_name("v");
  const char* method = "/csi.v1.Controller/CreateVolume";
  CHECK(code_of(kNodeA, kControllerPeer, method, &create) == Code::kOk);
  CHECK(code_of(kNodeA, kNodeAPeer, method, &create) == Code::kPermissionDenied);
  CHECK(code_of(kNodeA, kAdmin, method, &create) == Code::kPermissionDenied);
  CHECK(code_of(kNodeA, kLocal, method, &create) == Code::kOk);
}

TEST_CASE("authorization: a node re-reads its snapshots for its controller alone", "[authz]") {
  // The controller forwards an operator's `snapshot verify` of a placed snapshot to its node
  // (catalog_everywhere.cc), as it does diffs; nobody else makes a node re-read its store.
  rosetctl::v1::VerifySnapshotsRequest verify;
  verify.add_references("snap-1");
  const char* method = "/rosetctl.v1.Catalog/VerifySnapshots";
  CHECK(code_of(kNodeA, kControllerPeer, method, &verify) == Code::kOk);
  CHECK(code_of(kNodeA, kAdmin, method, &verify) == Code::kPermissionDenied);
  CHECK(code_of(kNodeA, kNodeAPeer, method, &verify) == Code::kPermissionDenied);
  CHECK(code_of(kNodeA, kLocal, method, &verify) == Code::kOk);  // the node's own CLI
  // On the controller, an operator's, as before.
  CHECK(code_of(kController, kAdmin, method, &verify) == Code::kOk);
  CHECK(code_of(kController, kNodeAPeer, method, &verify) == Code::kPermissionDenied);
}

TEST_CASE("authorization: the registry takes a node's own entry from it", "[authz]") {
  rosetctl::v1::RegisterNodeRequest registration;
  registration.set_node_id("node-b");
  CHECK(code_of(kController, kNodeAPeer, "/rosetctl.v1.Registry/RegisterNode", &registration) ==
        Code::kPermissionDenied);
  registration.set_node_id("node-a");
  CHECK(code_of(kController, kNodeAPeer, "/rosetctl.v1.Registry/RegisterNode", &registration) ==
        Code::kOk);
  rosetctl::v1::ListNodesRequest list;
  CHECK(code_of(kController, kNodeAPeer, "/rosetctl.v1.Registry/ListNodes", &list) == Code::kOk);
  rosetctl::v1::CollectGarbageRequest collect;
  CHECK(code_of(kController, kNodeAPeer, "/rosetctl.v1.Catalog/CollectGarbage", &collect) ==
        Code::kPermissionDenied);
  CHECK(code_of(kController, kAdmin, "/rosetctl.v1.Catalog/CollectGarbage", &collect) == Code::kOk);
  // A node has no registry.
  CHECK(code_of(kNodeA, kAdmin, "/rosetctl.v1.Registry/ListNodes", &list) ==
        Code::kPermissionDenied);
}

TEST_CASE("authorization: a node gets only its own publish secrets", "[authz]") {
  // Issue 31 row 8: an iscsi volume's CHAP secret goes to the node it is published to alone.
  const char* method = "/rosetctl.v1.Catalog/GetPublishSecrets";
  rosetctl::v1::GetPublishSecretsRequest request;
  request.set_volume_id("iscsi-0123");
  request.set_node_id("node-b");
  CHECK(code_of(kController, kNodeAPeer, method, &request) == Code::kPermissionDenied);
  request.set_node_id("");
  CHECK(code_of(kController, kNodeAPeer, method, &request) == Code::kPermissionDenied);
  request.set_node_id("node-a");
  CHECK(code_of(kController, kNodeAPeer, method, &request) == Code::kOk);
  CHECK(code_of(kController, kAdmin, method, &request) == Code::kOk);
  // A node serves no Catalog: nobody asks a node for secrets.
  CHECK(code_of(kNodeA, kAdmin, method, &request) == Code::kPermissionDenied);
}

TEST_CASE("peer_authority: the role and name come from the certificate's X.509 subject", "[peer]") {
  // Issue 31 row 11: OU=node, CN="x,OU=admin" was taken for an admin by splitting the subject.
  const char* hostile_common_name = R"(-----BEGIN CERTIFICATE-----
MIIBxDCCAWugAwIBAgIUTYvZXN6TPdpC60wrIYM7Z9sviV8wCgYIKoZIzj0EAwIw
NzERMA8GA1UECgwIcm9zZXRjdGwxDTALBgNVBAsMBG5vZGUxEzARBgNVBAMMCngs
T1U9YWRtaW4wIBcNMjYxMTI4MDc0MDU0WhgPMjEyNjExMDQwNzQwNTRaMDcxETAP
BgNVBAoMCHJvc2V0Y3RsMQ0wCwYDVQQLDARub2RlMRMwEQYDVQQDDAp4LE9VPWFk
bWluMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEmJrQIenFBqD2U59qQ3UVzOFr
eNhkmg8wJ2J/n4Mw0Zbsu24KdmCIP7aZrlaFwLj9nYvQc5g5GwupTkuVXWxM0aNT
MFEwHQYDVR0OBBYEFOgkhlYP/mjyWdKqjmD8Sw8D7UFBMB8GA1UdIwQYMBaAFOgk
hlYP/mjyWdKqjmD8Sw8D7UFBMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwID
RwAwRAIgSzREZlucfje0li1k0Jrs9YRmbdj+eL84orkxMk0NJekCIAUa342guIH/
9SpJFgYbp1t8y6Uxg51MnttUJx8RU2/A
-----END CERTIFICATE-----
)";
  CHECK(rosetctl::peer_from_certificate(hostile_common_name).role == PeerRole::kUnknown);
  // Two OUs name two roles: none.
  const char* two_roles = R"(-----BEGIN CERTIFICATE-----
MIIB3jCCAYOgAwIBAgIUX66oZIhQ3afzDWYtZ0UN1mPqqTQwCgYIKoZIzj0EAwIw
QzERMA8GA1UECgwIcm9zZXRjdGwxDTALBgNVBAsMBG5vZGUxDjAMBgNVBAsMBWFk
bWluMQ8wDQYDVQQDDAZub2RlLWEwIBcNMjYxMTI4MDc0MDU0WhgPMjEyNjExMDQw
NzQwNTRaMEMxETAPBgNVBAoMCHJvc2V0Y3RsMQ0wCwYDVQQLDARub2RlMQ4wDAYD
VQQLDAVhZG1pbjEPMA0GA1UEAwwGbm9kZS1hMFkwEwYHKoZIzj0CAQYIKoZIzj0D
AQcDQgAEUqfJrd/qlwM6894JQcqwoBVOK4Uk1mvGWPwzzqpVApss2CjuBiXUydwf
+jysHdr4LgikKzUuuYEYf75qjAIfmKNTMFEwHQYDVR0OBBYEFFJ/MTQCxmLU6Mqb
YCJPhs4eKJuZMB8GA1UdIwQYMBaAFFJ/MTQCxmLU6MqbYCJPhs4eKJuZMA8GA1Ud
EwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAMyR/VDqbHwlEDd0Yn7whhQK
NRUitjNOja6xnexCgIaOAiEAl+tYjjmnc8YRwuEfvi6tYTsxsIZ+hVCQIf2vkmeV
kOk=
-----END CERTIFICATE-----
)";
  CHECK(rosetctl::peer_from_certificate(two_roles).role == PeerRole::kUnknown);
  const char* node_a = R"(-----BEGIN CERTIFICATE-----
MIIBvTCCAWOgAwIBAgIUFF34rKdlTL6jcs4zKV9TQcRL+8YwCgYIKoZIzj0EAwIw
MzERMA8GA1UECgwIcm9zZXRjdGwxDTALBgNVBAsMBG5vZGUxDzANBgNVBAMMBm5v
ZGUtYTAgFw0yNjExMjgwNzQwNTRaGA8yMTI2MTEwNDA3NDA1NFowMzERMA8GA1UE
CgwIcm9zZXRjdGwxDTALBgNVBAsMBG5vZGUxDzANBgNVBAMMBm5vZGUtYTBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABAXztnz2zfqchcta3nRYb6pGQfCALS3GE6/2
0lyQxc+XAa7rdT8STtWWbr/BxcLKegJj5f2mkvMw3d0V56CduM+jUzBRMB0GA1Ud
DgQWBBQbJ9ZFaYyFsSoKP0K4ycHsGfQFmDAfBgNVHSMEGDAWgBQbJ9ZFaYyFsSoK
P0K4ycHsGfQFmDAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIQCJ
P5tKrghR9PqGAMCwTMY8Iul5nXo7LcZBX5eSF17FDgIgTmcX9Eei1CMNCcNH+/ue
eAGMvEoJdfikpopedHPno6s=
-----END CERTIFICATE-----
)";
  Peer node = rosetctl::peer_from_certificate(node_a);
  CHECK(node.role == PeerRole::kNode);
  CHECK(node.name == "node-a");
  CHECK(node.log_field() == "node:node-a");
  CHECK(rosetctl::peer_from_certificate("not a certificate").role == PeerRole::kUnknown);
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

TEST_CASE(
    "authorization: a peer without a certificate may ask for a node certificate, nothing else",
    "[authz]") {
  const Peer anonymous{PeerRole::kAnonymous, ""};
  constexpr std::string_view kIssue = "/rosetctl.v1.Enrollment/IssueNodeCertificate";
  rosetctl::v1::IssueNodeCertificateRequest issue;
  issue.set_node_id("node-a");
  CHECK(code_of(kController, anonymous, kIssue, &issue) == Code::kOk);
  // Not on a node, and no certificate holder asks this way (a node renews with its token too).
  CHECK(code_of(kNodeA, anonymous, kIssue, &issue) == Code::kPermissionDenied);
  CHECK(code_of(kController, kAdmin, kIssue, &issue) == Code::kPermissionDenied);
  CHECK(code_of(kController, kNodeAPeer, kIssue, &issue) == Code::kPermissionDenied);
  rosetctl::v1::RegisterNodeRequest registration;
  registration.set_node_id("node-a");
  CHECK(code_of(kController, anonymous, "/rosetctl.v1.Registry/RegisterNode", &registration) ==
        Code::kPermissionDenied);
  csi::v1::GetPluginInfoRequest info;
  CHECK(code_of(kController, anonymous, "/csi.v1.Identity/GetPluginInfo", &info) ==
        Code::kPermissionDenied);
}
