// Reading tgtadm's reports (providers/iscsi/tgt_show.cc), on text tgt 1.0.85 printed.
#include <catch2/catch.hpp>

#include "providers/iscsi/tgt_show.h"

using namespace rosetctl;

namespace {

// `tgtadm --lld iscsi --mode target --op show` with one initiator logged in.
constexpr std::string_view kTargets = R"(Target 1: iqn.2026-11.io.roset:vol1
    System information:
        Driver: iscsi
        State: ready
    I_T nexus information:
        I_T nexus: 4
            Initiator: iqn.2026-11.io.roset.test:node-a alias: guest
            Connection: 0
                IP Address: 127.0.0.1
    LUN information:
        LUN: 0
            Type: controller
            SCSI ID: IET     00010000
            SCSI SN: beaf10
            Size: 0 MB, Block size: 1
            Backing store type: null
            Backing store path: None
            Backing store flags: 
        LUN: 1
            Type: disk
            SCSI ID: vol1
            SCSI SN: vol1
            Size: 67 MB, Block size: 512
            Backing store type: rdwr
            Backing store path: /var/lib/rosetctl/images/vol1.img
            Backing store flags: 
    Account information:
        alice
        carol (outgoing)
    ACL information:
        iqn.2026-11.io.roset.test:node-a
Target 2: iqn.2026-11.io.roset:vol2
    System information:
        Driver: iscsi
        State: offline
    I_T nexus information:
    LUN information:
        LUN: 0
            Type: controller
            SCSI SN: beaf20
            Backing store path: None
    Account information:
    ACL information:
)";

}  // namespace

TEST_CASE("tgtadm's target report gives targets, LUNs, sessions, accounts and ACLs", "[iscsi]") {
  auto targets = parse_tgt_targets(kTargets);
  REQUIRE(targets);
  REQUIRE(targets->size() == 2);
  const TgtTarget& one = targets->at(0);
  CHECK(one.tid == 1);
  CHECK(one.name == "iqn.2026-11.io.roset:vol1");
  CHECK(one.state == "ready");
  REQUIRE(one.luns.size() == 2);
  CHECK(one.luns[1].lun == 1);
  CHECK(one.luns[1].serial == "vol1");
  CHECK(one.luns[1].backing_path == "/var/lib/rosetctl/images/vol1.img");
  REQUIRE(one.sessions.size() == 1);
  CHECK(one.sessions[0].sid == "4");
  CHECK(one.sessions[0].initiator == "iqn.2026-11.io.roset.test:node-a");
  CHECK(one.sessions[0].connections == std::vector<std::string>{"0"});
  CHECK(one.incoming_users == std::vector<std::string>{"alice"});
  CHECK(one.outgoing_users == std::vector<std::string>{"carol"});
  CHECK(one.acl == std::vector<std::string>{"iqn.2026-11.io.roset.test:node-a"});
  const TgtTarget& two = targets->at(1);
  CHECK(two.state == "offline");
  CHECK(two.luns.size() == 1);
  CHECK(two.acl.empty());
  CHECK(two.incoming_users.empty());
}

TEST_CASE("an empty target report is no targets; a strange one is an error", "[iscsi]") {
  auto none = parse_tgt_targets("");
  REQUIRE(none);
  CHECK(none->empty());
  // A changed layout must not read as "tgtd lost everything".
  auto strange = parse_tgt_targets("Targets:\n    1 iqn.x\n");
  REQUIRE_FALSE(strange);
  CHECK(strange.status().code() == Code::kInternal);
  CHECK(strange.status().message().find("Targets:") != std::string::npos);
}

TEST_CASE("a target that a session's alias forged over a real one makes the report untrusted",
          "[iscsi]") {
  // tgtd prints the alias as the initiator sent it: this one carries a second "Target 2".
  const std::string forged =
      "Target 1: iqn.2026-11.io.roset:vol1\n"
      "    System information:\n"
      "        Driver: iscsi\n"
      "        State: ready\n"
      "    I_T nexus information:\n"
      "        I_T nexus: 4\n"
      "            Initiator: iqn.2026-11.io.roset.test:node-a alias: x\n"
      "Target 2: iqn.2026-11.io.roset:vol2\n"
      "    System information:\n"
      "        State: ready\n"
      "    I_T nexus information:\n"
      "        I_T nexus: 5\n"
      "            Initiator: iqn.2026-11.io.roset.test:node-a alias: y\n"
      "            Connection: 0\n"
      "    LUN information:\n"
      "    ACL information:\n"
      "Target 2: iqn.2026-11.io.roset:vol2\n"
      "    System information:\n"
      "        State: ready\n"
      "    ACL information:\n"
      "        iqn.2026-11.io.roset.test:node-b\n";
  auto report = parse_tgt_targets(forged);
  REQUIRE_FALSE(report);
  CHECK(report.status().code() == Code::kInternal);
  CHECK(report.status().message().find("target id 2 twice") != std::string::npos);
  CHECK(report.status().message().find("alias") != std::string::npos);
  // A forged target with an id of its own but a real target's IQN is refused the same way.
  std::string renamed = forged;
  renamed.replace(renamed.find("Target 2"), 8, "Target 9");
  auto by_name = parse_tgt_targets(renamed);
  REQUIRE_FALSE(by_name);
  CHECK(by_name.status().message().find("\"iqn.2026-11.io.roset:vol2\" twice") !=
        std::string::npos);
}

TEST_CASE("tgtadm's account and system reports", "[iscsi]") {
  auto users = parse_tgt_accounts("Account list:\n    alice\n    bob\n");
  REQUIRE(users);
  CHECK(*users == std::vector<std::string>{"alice", "bob"});
  auto empty = parse_tgt_accounts("");
  REQUIRE(empty);
  CHECK(empty->empty());
  auto state = parse_tgt_system_state(
      "System:\n    State: ready\n    debug: off\nLLDs:\n    iscsi: ready\n    iser: error\n");
  REQUIRE(state);
  CHECK(*state == "ready");
  CHECK_FALSE(parse_tgt_system_state("LLDs:\n    iscsi: ready\n"));
}
