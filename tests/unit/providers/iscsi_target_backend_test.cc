// What a target backend accepts: IQN prefixes, volume ids, CHAP credentials
// (providers/iscsi/target_backend.cc).
#include <catch2/catch.hpp>

#include "providers/iscsi/target_backend.h"

using namespace rosetctl;

TEST_CASE("a target's IQN is the prefix, ':' and the volume id", "[iscsi]") {
  CHECK(target_iqn(kDefaultIscsiIqnPrefix, "iscsi-0123") == "iqn.2026-11.io.roset:iscsi-0123");
}

TEST_CASE("IQN prefixes must be iqn.YYYY-MM.domain in lowercase", "[iscsi]") {
  CHECK(validate_iqn_prefix(kDefaultIscsiIqnPrefix, "prefix").is_ok());
  CHECK(validate_iqn_prefix("iqn.2001-04.com.example.storage", "prefix").is_ok());
  for (std::string_view bad :
       {"", "iqn.", "iqn.2026-11", "iqn.2026-11.", "iqn.2026-11.IO.roset", "eui.02004567a425678d",
        "iqn.26-11.io.roset", "iqn.2026-11.io.roset:x", "iqn.2026-11.io roset"}) {
    INFO(bad);
    Status status = validate_iqn_prefix(bad, "--iscsi-iqn-prefix");
    CHECK(status.code() == Code::kInvalidArgument);
    CHECK(status.message().find("--iscsi-iqn-prefix") != std::string::npos);
  }
}

TEST_CASE("volume ids must fit an IQN and a 36-byte SCSI serial", "[iscsi]") {
  CHECK(validate_target_volume_id("iscsi-0123456789abcdef").is_ok());
  CHECK(validate_target_volume_id(std::string(36, 'a')).is_ok());
  for (std::string_view bad : {"", "Vol", "vol_1", "-vol", "vol:1", "vol/1"}) {
    INFO(bad);
    CHECK(validate_target_volume_id(bad).code() == Code::kInvalidArgument);
  }
  CHECK(validate_target_volume_id(std::string(37, 'a')).code() == Code::kInvalidArgument);
}

// Initiator names: tests/unit/core/iscsi_name_test.cc.

TEST_CASE("CHAP credentials are checked without the password in any message", "[iscsi]") {
  CHECK(validate_chap({"alice", "twelve-chars"}).is_ok());
  CHECK(validate_chap({"", "twelve-chars"}).code() == Code::kInvalidArgument);
  CHECK(validate_chap({"al ice", "twelve-chars"}).code() == Code::kInvalidArgument);
  for (std::string password :
       {std::string("short-pass1"), std::string("has a space!"), std::string("has,a,comma!!"),
        std::string("tab\there-ok??"), std::string(256, 'p')}) {
    INFO(password.size());
    Status status = validate_chap({"alice", password});
    CHECK(status.code() == Code::kInvalidArgument);
    CHECK(status.message().find(password) == std::string::npos);
    CHECK(status.message().find("alice") != std::string::npos);
  }
}
