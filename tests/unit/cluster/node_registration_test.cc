// Tests for src/cluster/node_registration.cc: what a registering node may say about itself.
#include "cluster/node_registration.h"

#include <catch2/catch.hpp>
#include <string>

namespace rosetctl {
namespace {

std::string message_of(const Status& status) {
  return status.message();
}

}  // namespace

TEST_CASE("node registration: addresses are HOST:PORT or [IPv6]:PORT", "[registry]") {
  for (const char* good : {"", "node1:9443", "node1.example.com:1", "10.0.0.7:65535",
                           "[fd00::7]:9443", "[::1]:443", "[::ffff:10.0.0.1]:80"}) {
    INFO(good);
    CHECK(validate_node_address(good).is_ok());
  }
  struct Bad {
    const char* address;
    const char* says;
  };
  for (const Bad& bad : {
           Bad{"node1", "must be HOST:PORT or [IPv6]:PORT"},
           Bad{"node1:", "must end in :PORT"},
           Bad{"node1:0", "has port 0; a port is 1 to 65535"},
           Bad{"node1:65536", "has port 65536"},
           Bad{"node1:+80", "must end in :PORT"},
           Bad{"node1:123456", "must end in :PORT"},
           Bad{":9443", "must start with a host name"},
           Bad{"-x:9443", "must start with a host name"},
           Bad{"no de:9443", "must start with a host name"},
           Bad{"fd00::7:9443", "without brackets"},
           Bad{"[fd00::7]", "must look like [IPv6]:PORT"},
           Bad{"[zz::1]:80", "no valid IPv6 address"},
           Bad{"[]:80", "no valid IPv6 address"},
           Bad{"[::1]:http", "must end in :PORT"},
           Bad{"evil\n\"x:1", "must start with a host name"},
       }) {
    INFO(bad.address);
    Status status = validate_node_address(bad.address);
    CHECK(status.code() == Code::kInvalidArgument);
    CHECK_THAT(message_of(status), Catch::StartsWith("address \""));
    CHECK_THAT(message_of(status), Catch::Contains(bad.says));
  }
  // Shown escaped: a caller's newline or quote never ends the message's line or quotes.
  CHECK_THAT(message_of(validate_node_address("evil\n\"x:1")),
             Catch::StartsWith("address \"evil\\x0a\\\"x:1\""));
  CHECK_THAT(message_of(validate_node_address(std::string(300, 'a') + ":1")),
             Catch::Contains("the limit is 261 bytes"));
}

TEST_CASE("node registration: initiator names are iSCSI names in lower case", "[registry]") {
  for (const char* good : {"", "iqn.1993-08.org.debian:01:abcdef", "iqn.2001-04.com.example:x",
                           "eui.02004567a425678d", "naa.52004567ba64678d"}) {
    INFO(good);
    CHECK(validate_initiator_name(good).is_ok());
  }
  for (const char* bad : {"iqn.", "foo.bar", "iqn.2001-04.com.example:has space", "iqn.x/y"}) {
    INFO(bad);
    Status status = validate_initiator_name(bad);
    CHECK(status.code() == Code::kInvalidArgument);
    CHECK_THAT(message_of(status),
               Catch::StartsWith(fmt::format("iscsi_initiator \"{}\" is not an iSCSI name", bad)));
  }
  // Capitals are refused, not folded: the node sends its name as written (see iscsi_name.h).
  Status shouted = validate_initiator_name("IQN.2001-04.com.example:X");
  CHECK(shouted.code() == Code::kInvalidArgument);
  CHECK_THAT(message_of(shouted),
             Catch::StartsWith("iscsi_initiator \"IQN.2001-04.com.example:X\" is not written in "
                               "lower case"));
  CHECK_THAT(message_of(shouted), Catch::Contains("write it as \"iqn.2001-04.com.example:x\""));
  CHECK_THAT(message_of(validate_initiator_name("iqn." + std::string(220, 'a'))),
             Catch::Contains("at most 223 bytes"));
}

TEST_CASE("node registration: topology is bounded", "[registry]") {
  CHECK(validate_topology({}).is_ok());
  CHECK(validate_topology({{"topology.rosetctl.io/node", "node-a.example.com"}, {"zone", "b_1"}})
            .is_ok());
  std::map<std::string, std::string> many;
  for (int i = 0; i < 33; ++i)
    many["k" + std::to_string(i)] = "v";
  CHECK_THAT(message_of(validate_topology(many)), Catch::Contains("33 segments; the limit is 32"));
  CHECK_THAT(message_of(validate_topology({{"", "v"}})), Catch::Contains("topology key \"\""));
  CHECK_THAT(message_of(validate_topology({{"a key", "v"}})),
             Catch::Contains("topology key \"a key\""));
  CHECK_THAT(message_of(validate_topology({{std::string(318, 'k'), "v"}})),
             Catch::Contains("must be 1-317 bytes"));
  CHECK_THAT(message_of(validate_topology({{"zone", ""}})),
             Catch::Contains("topology value \"\" of key \"zone\""));
  CHECK_THAT(message_of(validate_topology({{"zone", "a/b"}})),
             Catch::Contains("topology value \"a/b\""));
  CHECK(validate_topology({{"zone", std::string(192, 'v')}}).is_ok());
  CHECK_FALSE(validate_topology({{"zone", std::string(193, 'v')}}).is_ok());
}

TEST_CASE("node registration: versions are short printable words", "[registry]") {
  CHECK(validate_version("").is_ok());
  CHECK(validate_version("0.1.0-rc1+g3f9a").is_ok());
  CHECK_FALSE(validate_version("0.1 beta").is_ok());
  CHECK_FALSE(validate_version(std::string(65, '1')).is_ok());
  CHECK_THAT(message_of(validate_version("\x1b[31m")), Catch::Contains("\"\\x1b[31m\""));
}

}  // namespace rosetctl
