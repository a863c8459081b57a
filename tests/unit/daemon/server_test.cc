// Tests for the address checks of src/daemon/server.cc.
#include "daemon/server.h"

#include <catch2/catch.hpp>

using rosetctl::check_tcp_address;
using rosetctl::Code;

TEST_CASE("server: TCP addresses are HOST:PORT or [IPV6]:PORT", "[server]") {
  for (const char* good :
       {"192.0.2.1:9443", "ctl.example:443", "[::1]:1", "[fd00::7]:65535", "localhost:8080"}) {
    INFO(good);
    CHECK(check_tcp_address(good, "--listen", false).is_ok());
  }
  CHECK(check_tcp_address("0.0.0.0:0", "--listen", true).is_ok());
  for (const char* bad : {"nonsense", "192.0.2.1", ":9443", "host:", "host:0", "host:65536",
                          "host:12a", "::1:80", "[::1:80", "ho st:80", "h\\nx:80", "host:123456"}) {
    INFO(bad);
    rosetctl::Status status = check_tcp_address(bad, "--listen", false);
    CHECK(status.code() == Code::kInvalidArgument);
    CHECK_THAT(status.message(), Catch::StartsWith("--listen \""));
  }
}

TEST_CASE("server: the CSI endpoint is a unix socket; TCP is --listen", "[server]") {
  auto tcp = rosetctl::parse_unix_endpoint("tcp://192.0.2.1:5000");
  REQUIRE_FALSE(tcp.has_value());
  CHECK(tcp.status().code() == Code::kInvalidArgument);
  CHECK_THAT(tcp.status().message(), Catch::Contains("--listen"));
  CHECK(*rosetctl::parse_unix_endpoint("unix:///run/x.sock") == "/run/x.sock");
}
