// Checks of a node's registration; see node_registration.h for the rules.
#include "cluster/node_registration.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>

#include "core/iscsi_name.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

bool is_registration_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool every_char(std::string_view text, bool (*allowed)(char)) {
  return std::all_of(text.begin(), text.end(), allowed);
}

bool is_host_char(char c) {
  return is_registration_alnum(c) || c == '.' || c == '-';
}

Status bad_address(std::string_view address, std::string_view why) {
  return error(Code::kInvalidArgument, "address {} {}", display_quoted(address), why);
}

// The port of an address: 1-65535, decimal digits only.
Status validate_port(std::string_view address, std::string_view port) {
  if (port.empty() || port.size() > 5 ||
      !every_char(port, [](char c) { return c >= '0' && c <= '9'; })) {
    return bad_address(address, "must end in :PORT, a port number from 1 to 65535");
  }
  uint32_t value = 0;
  for (char c : port)
    value = value * 10 + static_cast<uint32_t>(c - '0');
  if (value < 1 || value > 65535) {
    return bad_address(address, fmt::format("has port {}; a port is 1 to 65535", value));
  }
  return Status::ok();
}

}  // namespace

Status validate_node_address(std::string_view address) {
  if (address.empty()) return Status::ok();
  constexpr std::size_t kMaxAddressBytes = 261;  // a 253-byte host name, ':' and a port
  if (address.size() > kMaxAddressBytes) {
    return error(Code::kInvalidArgument, "address is {} bytes long; the limit is {} bytes",
                 address.size(), kMaxAddressBytes);
  }
  if (address.front() == '[') {
    std::size_t close = address.find("]:");
    if (close == std::string_view::npos) {
      return bad_address(address, "must look like [IPv6]:PORT, e.g. [fd00::1]:9443");
    }
    std::string host(address.substr(1, close - 1));
    in6_addr parsed{};
    if (host.empty() || ::inet_pton(AF_INET6, host.c_str(), &parsed) != 1) {
      return bad_address(address, "has no valid IPv6 address between its brackets");
    }
    return validate_port(address, address.substr(close + 2));
  }
  std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return bad_address(address, "must be HOST:PORT or [IPv6]:PORT, e.g. node1.example.com:9443");
  }
  std::string_view host = address.substr(0, colon);
  if (host.find(':') != std::string_view::npos) {
    return bad_address(address, "holds an IPv6 address without brackets; write [fd00::1]:9443");
  }
  if (host.empty() || !every_char(host, is_host_char) || host.front() == '-' ||
      host.front() == '.') {
    return bad_address(address,
                       "must start with a host name or IPv4 address (letters, digits, '.' and "
                       "'-')");
  }
  return validate_port(address, address.substr(colon + 1));
}

Status validate_initiator_name(std::string_view name) {
  if (name.empty()) return Status::ok();
  return validate_iscsi_name(name, "iscsi_initiator");
}

Status validate_topology(const std::map<std::string, std::string>& topology) {
  if (topology.size() > kMaxTopologySegments) {
    return error(Code::kInvalidArgument, "topology has {} segments; the limit is {}",
                 topology.size(), kMaxTopologySegments);
  }
  for (const auto& [key, value] : topology) {
    bool key_ok = !key.empty() && key.size() <= kMaxTopologyKeyBytes &&
                  is_registration_alnum(key.front()) && every_char(key, [](char c) {
                    return is_registration_alnum(c) || c == '.' || c == '_' || c == '-' || c == '/';
                  });
    if (!key_ok) {
      return error(Code::kInvalidArgument,
                   "topology key {} must be 1-{} bytes of letters, digits, '.', '_', '-' and '/', "
                   "starting with a letter or digit",
                   display_quoted(key), kMaxTopologyKeyBytes);
    }
    bool value_ok =
        !value.empty() && value.size() <= kMaxTopologyValueBytes && every_char(value, [](char c) {
          return is_registration_alnum(c) || c == '.' || c == '_' || c == '-';
        });
    if (!value_ok) {
      return error(Code::kInvalidArgument,
                   "topology value {} of key {} must be 1-{} bytes of letters, digits, '.', '_' "
                   "and '-'",
                   display_quoted(value), display_quoted(key), kMaxTopologyValueBytes);
    }
  }
  return Status::ok();
}

Status validate_version(std::string_view version) {
  bool ok = version.size() <= kMaxVersionBytes &&
            every_char(version, [](char c) { return c > 0x20 && c < 0x7f; });
  if (ok) return Status::ok();
  return error(Code::kInvalidArgument,
               "version {} must be at most {} bytes of printable ASCII without spaces",
               display_quoted(version), kMaxVersionBytes);
}

}  // namespace rosetctl
