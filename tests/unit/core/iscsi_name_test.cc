// iSCSI names: their forms, their normal form, and names that must be in it
// (src/core/iscsi_name.cc).
#include "core/iscsi_name.h"

#include <catch2/catch.hpp>

using namespace rosetctl;

namespace {

std::string normal_form(std::string_view name) {
  auto normal = normalize_iscsi_name(name, "iscsi_initiator");
  INFO(name);
  REQUIRE(normal);
  return *normal;
}

Status refusal(std::string_view name) {
  auto normal = normalize_iscsi_name(name, "iscsi_initiator");
  INFO(name);
  REQUIRE(!normal);
  return normal.status();
}

}  // namespace

TEST_CASE("iSCSI names: the three forms pass as they are in lower case", "[iscsi-name]") {
  for (std::string_view name :
       {"iqn.1993-08.org.debian:01:5e1f2a3b4c", "iqn.2026-11.io.roset.test:node-a",
        "iqn.2001-04.com.example", "iqn.2001-04.com.example:storage:disk.sys1.xyz",
        "eui.02004567a425678d", "naa.52004567ba64678d", "naa.6001405ab5a9b25a9cd34bd5a76dd1e3"}) {
    CHECK(normal_form(name) == name);
  }
}

TEST_CASE("iSCSI names: case is folded, so two spellings are one name", "[iscsi-name]") {
  CHECK(normal_form("IQN.1993-08.ORG.Debian:01:5E1F2A3B4C") ==
        "iqn.1993-08.org.debian:01:5e1f2a3b4c");
  CHECK(normal_form("EUI.02004567A425678D") == "eui.02004567a425678d");
  CHECK(normal_form("Naa.52004567BA64678D") == "naa.52004567ba64678d");
  CHECK(normal_form("iqn.2026-11.io.roset.test:Node-A") ==
        normal_form("iqn.2026-11.io.roset.test:node-a"));
}

TEST_CASE("iSCSI names: anything else is INVALID_ARGUMENT naming the field and the form",
          "[iscsi-name]") {
  struct Case {
    std::string_view name;
    std::string_view says;
  };
  for (const Case& bad : {
           Case{"node-a", "it must start with iqn., eui. or naa."},
           Case{"iqn.", "an iqn. name is iqn.YYYY-MM.reversed.domain"},
           Case{"iqn.x/y", "an iqn. name is iqn.YYYY-MM.reversed.domain"},
           Case{"iqn.93-08.org.debian:x", "an iqn. name is iqn.YYYY-MM.reversed.domain"},
           Case{"iqn.1993-13.org.debian:x", "an iqn. name is iqn.YYYY-MM.reversed.domain"},
           Case{"iqn.1993-08.:x", "an iqn. name is iqn.YYYY-MM.reversed.domain"},
           Case{"iqn.1993-08.org_debian:x", "an iqn. name is iqn.YYYY-MM.reversed.domain"},
           Case{"iqn.2001-04.com.example:has space", "after the domain an iqn. name holds only"},
           Case{"iqn.2001-04.com.example:a,b", "after the domain an iqn. name holds only"},
           Case{"eui.02004567a425678", "an eui. name is eui. and 16 hex digits"},
           Case{"eui.02004567a425678g", "an eui. name is eui. and 16 hex digits"},
           Case{"naa.52004567ba64678d0", "a naa. name is naa. and 16 or 32 hex digits"},
       }) {
    Status status = refusal(bad.name);
    INFO(status.message());
    CHECK(status.code() == Code::kInvalidArgument);
    CHECK_THAT(status.message(), Catch::StartsWith("iscsi_initiator \""));
    CHECK_THAT(status.message(), Catch::Contains("is not an iSCSI name: " + std::string(bad.says)));
  }
}

TEST_CASE("iSCSI names: control characters are quoted escaped, long names refused by size",
          "[iscsi-name]") {
  CHECK_THAT(refusal("iqn.2001-04.com.example:x\nFAKE LOG LINE").message(),
             Catch::StartsWith("iscsi_initiator \"iqn.2001-04.com.example:x\\x0aFAKE LOG LINE\""));
  CHECK(refusal("").message() == "iscsi_initiator is required");
  std::string longest = "iqn.2001-04.com.example:" + std::string(223 - 24, 'a');
  CHECK(normal_form(longest) == longest);
  CHECK(refusal(longest + "a").message() ==
        "iscsi_initiator is 224 bytes long; iSCSI names have at most 223 bytes");
}

TEST_CASE("iSCSI names: a name that goes on an ACL must already be in its normal form",
          "[iscsi-name]") {
  CHECK(validate_iscsi_name("iqn.2026-11.io.roset.test:node-a", "iscsi_initiator").is_ok());
  CHECK(validate_iscsi_name("eui.02004567a425678d", "iscsi_initiator").is_ok());
  Status shouted = validate_iscsi_name("IQN.2026-11.io.roset.test:Node-A", "iscsi_initiator");
  CHECK(shouted.code() == Code::kInvalidArgument);
  CHECK(shouted.message() ==
        "iscsi_initiator \"IQN.2026-11.io.roset.test:Node-A\" is not written in lower case, the "
        "normal form of iSCSI names: initiators send their name as written and tgtd compares "
        "names byte for byte, so write it as \"iqn.2026-11.io.roset.test:node-a\" (in "
        "/etc/iscsi/initiatorname.iscsi on the node, then restart iscsid)");
  // Not a name at all: the form's message, not the case's.
  CHECK_THAT(validate_iscsi_name("NODE-A", "initiator name").message(),
             Catch::StartsWith("initiator name \"NODE-A\" is not an iSCSI name: it must start"));
}
