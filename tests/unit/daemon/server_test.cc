// Tests for the address checks of src/daemon/server.cc.
#include "daemon/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <string>

#include "core/unique_fd.h"

using rosetctl::check_tcp_address;
using rosetctl::Code;
using rosetctl::tcp_address_taken;
using rosetctl::UniqueFd;

namespace {

// A socket bound to 127.0.0.1 with SO_REUSEPORT, as gRPC binds its listeners; port 0 picks one.
UniqueFd reuseport_socket(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.valid());
  int on = 1;
  REQUIRE(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) == 0);
  REQUIRE(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  return fd;
}

int port_of(const UniqueFd& fd) {
  sockaddr_in address = {};
  socklen_t size = sizeof(address);
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &size) == 0);
  return ntohs(address.sin_port);
}

}  // namespace

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

TEST_CASE("server: a TCP address another socket listens on is taken, even with SO_REUSEPORT",
          "[server]") {
  UniqueFd listener = reuseport_socket(0);
  REQUIRE(::listen(listener.get(), 4) == 0);
  std::string port = std::to_string(port_of(listener));
  CHECK(tcp_address_taken("127.0.0.1:" + port));
  CHECK(tcp_address_taken("0.0.0.0:" + port));  // a wildcard covers 127.0.0.1
  CHECK(tcp_address_taken("localhost:" + port));
  CHECK_FALSE(tcp_address_taken("127.0.0.1:0"));
  CHECK_FALSE(tcp_address_taken("192.0.2.77:" + port));  // not this host's: bind's to say

  // Its connections left in TIME_WAIT (the side that closes first keeps it) do not make the
  // port taken once it stops listening: a restarted serve binds it again at once.
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  UniqueFd accepted(::accept(listener.get(), nullptr, nullptr));
  REQUIRE(accepted.valid());
  accepted.reset();
  char byte;
  REQUIRE(::recv(client.get(), &byte, 1, 0) == 0);  // its FIN; our close leaves it TIME_WAIT
  client.reset();
  listener.reset();
  CHECK_FALSE(tcp_address_taken("127.0.0.1:" + port));
}
