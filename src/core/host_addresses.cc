#include "core/host_addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <memory>

namespace rosetctl {
namespace {

struct FreeIfaddrs {
  void operator()(ifaddrs* list) const { ::freeifaddrs(list); }
};

// Canonical text of a loopback-free, link-local-free address, or "" for one to leave out.
std::string address_text(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    if ((ntohl(v4->sin_addr.s_addr) >> 24) == 127) return "";
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
  } else if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr) || IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) return "";
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
  }
  return text;
}

}  // namespace

Expected<std::string> host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return errno_status(errno, "gethostname");
  return std::string(name);
}

Expected<std::vector<std::string>> host_addresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return errno_status(errno, "cannot list network addresses");
  std::unique_ptr<ifaddrs, FreeIfaddrs> owned(list);
  std::vector<std::string> out;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    std::string text = address_text(entry->ifa_addr);
    if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  return out;
}

}  // namespace rosetctl
