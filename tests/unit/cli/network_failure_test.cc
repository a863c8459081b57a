// Tests for src/cli/network_failure.cc: gRPC's connection errors in an operator's words.
#include "cli/network_failure.h"

#include <catch2/catch.hpp>

using rosetctl::Code;
using rosetctl::Status;
using rosetctl::cli::closed_at_once;
using rosetctl::cli::network_failure;

namespace {

Status unavailable(const char* details) {
  return {Code::kUnavailable, details};
}

}  // namespace

TEST_CASE("network_failure: TLS refusals are PERMISSION_DENIED and not retried", "[network]") {
  Status tls = network_failure(
      "192.0.2.1:9443",
      unavailable("failed to connect to all addresses; last error: UNKNOWN: ipv4:192.0.2.1:9443: "
                  "Tls handshake failed: SSL_ERROR_SSL: certificate verify failed"),
      0);
  CHECK(tls.code() == Code::kPermissionDenied);
  CHECK_THAT(tls.message(), Catch::StartsWith("TLS with controller \"192.0.2.1:9443\" failed"));
  CHECK_THAT(tls.message(), Catch::Contains("names \"192.0.2.1\""));
}

TEST_CASE("network_failure: an unreachable controller is UNAVAILABLE, with the cause",
          "[network]") {
  Status refused = network_failure(
      "ctl:1",
      unavailable("ipv4:192.0.2.1:1: Failed to connect to remote host: Connection refused"), 0);
  CHECK(refused.code() == Code::kUnavailable);
  CHECK_THAT(refused.message(), Catch::Contains("refused the connection"));
  Status late = network_failure("ctl:1", unavailable("Deadline Exceeded"), 0);
  CHECK_THAT(late.message(), Catch::Contains("did not answer in time"));
  Status no_route = network_failure("ctl:1", unavailable("connect: No route to host (113)"), 0);
  CHECK_THAT(no_route.message(), Catch::Contains("no route"));
}

TEST_CASE("network_failure: connections closed at once, again and again, are a refused certificate",
          "[network]") {
  Status closed = unavailable(
      "failed to connect to all addresses; last error: UNAVAILABLE: "
      "ipv4:192.0.2.1:9443: Socket closed");
  CHECK(closed_at_once(closed));
  CHECK(network_failure("ctl:1", closed, 0).code() == Code::kUnavailable);  // a restart, maybe
  CHECK(network_failure("ctl:1", closed, 1).code() == Code::kUnavailable);
  Status refused = network_failure("ctl:1", closed, 2);
  CHECK(refused.code() == Code::kPermissionDenied);
  CHECK_THAT(refused.message(), Catch::Contains("refuses a client certificate"));
}
