// What a target backend accepts: IQN prefixes, volume ids, CHAP credentials and the tgtd account
// they become (providers/iscsi/target_backend.cc, tgt_chap.cc); the CHAP user a consumer logs in
// as (iscsi_node.cc).
#include <catch2/catch.hpp>

#include "providers/iscsi/iscsi_node.h"
#include "providers/iscsi/target_backend.h"
#include "providers/iscsi/tgt_backend.h"

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

// Initiator names: tests/unit/core/iscsi_name_test.cc (the backend takes them in normal form).

TEST_CASE("a volume's tgtd CHAP account is named after the volume, whatever user is asked for",
          "[iscsi]") {
  CHECK(tgt_chap_account("iscsi-0123", "alice") == "iscsi-0123:alice");
  // A user that names another volume's account still gets an account of this volume: a volume
  // id holds no ':', so the name up to its first ':' is always the volume's.
  CHECK(tgt_chap_account("iscsi-bbbb", "iscsi-aaaa:alice") == "iscsi-bbbb:iscsi-aaaa:alice");
  CHECK(tgt_chap_account("iscsi-bbbb", "alice") != tgt_chap_account("iscsi-aaaa", "alice"));
}

TEST_CASE("a consumer logs in as the account the publish context names", "[iscsi]") {
  StringMap secrets = {{"chap-user", "alice"}, {"chap-password", "twelve-chars"}};
  auto plain = iscsi::chap_for_login(secrets, {});
  REQUIRE(plain);
  REQUIRE(plain->has_value());
  CHECK((*plain)->initiator.user == "alice");
  CHECK(!(*plain)->target.has_value());
  auto named = iscsi::chap_for_login(secrets, {{"chap-user", "iscsi-0123:alice"}});
  REQUIRE(named);
  CHECK((*named)->initiator.user == "iscsi-0123:alice");
  CHECK((*named)->initiator.password == "twelve-chars");
  auto none = iscsi::chap_for_login({}, {{"chap-user", "iscsi-0123:alice"}});
  REQUIRE(none);
  CHECK(!none->has_value());
  auto bad = iscsi::chap_for_login(secrets, {{"chap-user", "a b\nc"}});
  REQUIRE(!bad);
  CHECK(bad.status().code() == Code::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("\"a b\\x0ac\": not a CHAP user name"));
}

TEST_CASE("the target's account of mutual CHAP comes from the secrets, both halves or none",
          "[iscsi]") {
  StringMap secrets = {{"chap-user", "iscsi-0123:n1"},
                       {"chap-password", "twelve-chars"},
                       {"chap-user-in", "iscsi-0123:target"},
                       {"chap-password-in", "other-twelve"}};
  auto mutual = iscsi::chap_for_login(secrets, {});
  REQUIRE(mutual);
  REQUIRE(mutual->has_value());
  REQUIRE((*mutual)->target.has_value());
  CHECK((*mutual)->target->user == "iscsi-0123:target");
  CHECK((*mutual)->target->password == "other-twelve");
  secrets.erase("chap-password-in");
  auto half = iscsi::chap_for_login(secrets, {});
  REQUIRE(!half);
  CHECK(half.status().code() == Code::kInvalidArgument);
  CHECK_THAT(half.status().message(), Catch::Contains("only \"chap-user-in\" was given"));
  CHECK_THAT(half.status().message(), !Catch::Contains("twelve"));
}

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
