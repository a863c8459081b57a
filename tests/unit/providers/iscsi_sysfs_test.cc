// Finding iSCSI sessions and their disks in sysfs (providers/iscsi/iscsi_sysfs.cc), on a tree
// laid out as the kernel lays it out (the real one is checked in a QEMU guest by the
// integration tests), and what iscsiadm's exit codes mean.
#include "providers/iscsi/iscsi_sysfs.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "providers/iscsi/iscsi_node.h"
#include "providers/iscsi/open_iscsi.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using rosetctl::testing::ScratchDir;
using rosetctl::testing::write_file;
namespace fs = std::filesystem;

namespace {

// session<N> on SCSI host <host>, with LUN `lun` as disk `disk` reporting `serial`.
void add_session(const ScratchDir& sysfs, int number, int host, const std::string& target, int lun,
                 const std::string& disk, const std::string& serial) {
  std::string session = fmt::format("session{}", number);
  std::string device = fmt::format("{}/devices/platform/host{}/{}", sysfs.path, host, session);
  std::string scsi = fmt::format("{}/target{}:0:0/{}:0:0:{}", device, host, host, lun);
  fs::create_directories(scsi + "/block/" + disk);
  std::string klass = sysfs / ("class/iscsi_session/" + session);
  fs::create_directories(klass);
  write_file(klass + "/targetname", target + "\n");
  fs::create_symlink(fs::relative(device, klass), klass + "/device");
  std::string connection = sysfs / fmt::format("class/iscsi_connection/connection{}:0", number);
  fs::create_directories(connection);
  write_file(connection + "/persistent_address", "10.0.2.2\n");
  write_file(connection + "/persistent_port", "3260\n");
  fs::create_directories(sysfs / ("block/" + disk + "/device"));
  std::string page =
      std::string("\0\x80\0", 3) + static_cast<char>(serial.size() + 2) + serial + "  ";
  write_file(sysfs / ("block/" + disk + "/device/vpd_pg80"), page);
  write_file(sysfs / ("block/" + disk + "/size"), "2097152\n");
}

}  // namespace

TEST_CASE("a host without the iSCSI transport has no sessions", "[iscsi]") {
  ScratchDir sysfs;
  auto sessions = iscsi::list_kernel_sessions(sysfs.path);
  REQUIRE(sessions);
  CHECK(sessions->empty());
  auto disk = iscsi::find_session_disk(sysfs.path, "iqn.x:y", 1);
  REQUIRE(disk);
  CHECK(!disk->has_value());
}

TEST_CASE("sessions name their target and portal; the LUN's disk is found by target and LUN",
          "[iscsi]") {
  ScratchDir sysfs;
  add_session(sysfs, 1, 2, "iqn.2026-11.io.roset:local-a", 1, "sdb", "local-a");
  add_session(sysfs, 2, 3, "iqn.2026-11.io.roset:local-b", 1, "sdc", "local-b");

  auto sessions = iscsi::list_kernel_sessions(sysfs.path);
  REQUIRE(sessions);
  REQUIRE(sessions->size() == 2);
  CHECK((*sessions)[0].target == "iqn.2026-11.io.roset:local-a");
  CHECK((*sessions)[0].portal == "10.0.2.2:3260");

  auto disk = iscsi::find_session_disk(sysfs.path, "iqn.2026-11.io.roset:local-b", 1);
  REQUIRE(disk);
  REQUIRE(disk->has_value());
  CHECK(**disk == "sdc");
  auto other_lun = iscsi::find_session_disk(sysfs.path, "iqn.2026-11.io.roset:local-b", 2);
  REQUIRE(other_lun);
  CHECK(!other_lun->has_value());

  auto serial = iscsi::read_unit_serial(sysfs.path, "sdc");
  REQUIRE(serial);
  CHECK(*serial == "local-b");
  auto bytes = iscsi::read_disk_bytes(sysfs.path, "sdc");
  REQUIRE(bytes);
  CHECK(*bytes == 1024 * 1024 * 1024);
}

TEST_CASE("a disk without a serial page is an error, never an empty match", "[iscsi]") {
  ScratchDir sysfs;
  fs::create_directories(sysfs / "block/sdd/device");
  auto serial = iscsi::read_unit_serial(sysfs.path, "sdd");
  REQUIRE(!serial);
  CHECK(serial.status().message().find("sdd") != std::string::npos);
  write_file(sysfs / "block/sdd/device/vpd_pg80", std::string("\0\x83\0\0", 4));
  CHECK(!iscsi::read_unit_serial(sysfs.path, "sdd"));
}

TEST_CASE("attach waits for a disk whose serial page the kernel has not read yet", "[iscsi]") {
  // The disk appears in sysfs before its VPD page can be read: that is "not yet", not a failure
  // (a guest's connect failed on it at once). Until the deadline it is waited for; after it, the
  // answer is DEADLINE_EXCEEDED naming the page.
  ScratchDir sysfs;
  add_session(sysfs, 1, 2, "iqn.2026-11.io.roset:local-a", 1, "sdb", "local-a");
  fs::remove(sysfs / "block/sdb/device/vpd_pg80");
  iscsi::OpenIscsi initiator(sysfs.path, sysfs / "nodes");
  iscsi::LunAddress lun{"10.0.2.2:3260", "iqn.2026-11.io.roset:local-a", 1, "local-a"};
  auto attached = initiator.attach(lun, std::nullopt, std::chrono::milliseconds(300));
  REQUIRE(!attached);
  CHECK(attached.status().code() == Code::kDeadlineExceeded);
  CHECK(attached.status().message().find("vpd_pg80") != std::string::npos);
}

TEST_CASE("iscsiadm's exit codes become the codes the CSI spec asks for", "[iscsi]") {
  CHECK(iscsi::iscsiadm_failure(19, "login error", "x").code() == Code::kPermissionDenied);
  CHECK(iscsi::iscsiadm_failure(24, "auth failed", "x").code() == Code::kPermissionDenied);
  CHECK(iscsi::iscsiadm_failure(8, "timed out", "x").code() == Code::kUnavailable);
  CHECK(iscsi::iscsiadm_failure(4, "refused", "x").code() == Code::kUnavailable);
  Status other = iscsi::iscsiadm_failure(6, "database", "making the record");
  CHECK(other.code() == Code::kInternal);
  CHECK(other.message().find("making the record") != std::string::npos);
  CHECK(other.message().find("database") != std::string::npos);
}

TEST_CASE("a publish context names the LUN to log in to; a missing key is named", "[iscsi]") {
  StringMap context = {{"portal", "10.0.2.2:3260"},
                       {"iqn", "iqn.2026-11.io.roset:iscsi-a"},
                       {"lun", "1"},
                       {"serial", "iscsi-a"}};
  auto lun = iscsi::lun_from_publish_context(context);
  REQUIRE(lun);
  CHECK(lun->portal == "10.0.2.2:3260");
  CHECK(lun->lun == 1);
  CHECK(lun->serial == "iscsi-a");
  for (const char* key : {"portal", "iqn", "lun", "serial"}) {
    StringMap partial = context;
    partial.erase(key);
    auto refused = iscsi::lun_from_publish_context(partial);
    REQUIRE(!refused);
    CHECK(refused.status().code() == Code::kInvalidArgument);
    CHECK(refused.status().message().find(key) != std::string::npos);
  }
  context["lun"] = "1x";
  CHECK(iscsi::lun_from_publish_context(context).status().code() == Code::kInvalidArgument);
}

TEST_CASE("CHAP needs both secrets, and an error never shows the password", "[iscsi]") {
  auto none = iscsi::chap_from_secrets({});
  REQUIRE(none);
  CHECK(!none->has_value());
  auto both = iscsi::chap_from_secrets({{"chap-user", "u"}, {"chap-password", "s3cret"}});
  REQUIRE(both);
  CHECK((*both)->password == "s3cret");
  auto half = iscsi::chap_from_secrets({{"chap-password", "s3cret"}});
  REQUIRE(!half);
  CHECK(half.status().code() == Code::kInvalidArgument);
  CHECK(half.status().message().find("s3cret") == std::string::npos);
  CHECK(half.status().message().find("chap-user") != std::string::npos);
}
