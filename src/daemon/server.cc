// Socket lifecycle (the unix socket, checks of TCP addresses) and signal handling for `serve`.
#include "daemon/server.h"

#include <fmt/ranges.h>
#include <malloc.h>
#include <netdb.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <optional>

#include "cluster/replica_loop.h"
#include "core/unique_fd.h"
#include "core/validate.h"
#include "core/version.h"

namespace rosetctl {
namespace {

// connect(2) tells a live listener from a leftover socket file.
bool someone_listens(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return live;
}

Status make_parent_directory(const std::string& path) {
  std::string parent = path.substr(0, path.rfind('/'));
  for (std::size_t pos = parent.find('/', 1);; pos = parent.find('/', pos + 1)) {
    std::string prefix = pos == std::string::npos ? parent : parent.substr(0, pos);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return errno_status(errno, fmt::format("cannot create directory \"{}\"", prefix));
    }
    if (pos == std::string::npos) return Status::ok();
  }
}

}  // namespace

Expected<std::string> parse_unix_endpoint(std::string_view endpoint) {
  std::string_view path = endpoint;
  if (endpoint.starts_with("unix://")) {
    path.remove_prefix(7);
  } else if (endpoint.starts_with("unix:")) {
    path.remove_prefix(5);
  } else if (endpoint.starts_with("tcp:") || endpoint.find("://") != std::string_view::npos) {
    return error(Code::kInvalidArgument,
                 "endpoint {}: the CSI endpoint is a unix socket; TCP listeners are given with "
                 "--listen ADDR:PORT and always use mutual TLS",
                 display_quoted(endpoint));
  }
  auto normal = normalize_absolute_path(path, "endpoint socket path");
  if (!normal) return normal.status();
  if (normal->size() >= sizeof(sockaddr_un::sun_path)) {
    return error(Code::kInvalidArgument, "socket path \"{}\" is longer than {} bytes", *normal,
                 sizeof(sockaddr_un::sun_path) - 1);
  }
  return normal;
}

Status check_tcp_address(std::string_view address, std::string_view flag, bool port_zero_ok) {
  auto bad = [&](std::string_view why) {
    return error(Code::kInvalidArgument, "{} {}: {} (expected HOST:PORT or [IPV6]:PORT)", flag,
                 display_quoted(address), why);
  };
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string_view host = address.substr(0, colon);
  std::string_view port = address.substr(colon + 1);
  if (host.starts_with('[')) {
    if (!host.ends_with(']') || host.size() < 3) return bad("an IPv6 address needs [ and ]");
  } else if (host.find(':') != std::string_view::npos) {
    return bad("an IPv6 address needs [ and ]");
  }
  if (host.empty()) return bad("no host");
  for (char c : host) {
    bool allowed = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                   c == ':' || c == '[' || c == ']' || c == '_';
    if (!allowed) return bad("the host has a character a host name or address cannot have");
  }
  int value = 0;
  if (port.empty() || port.size() > 5) return bad("the port is not a number from 1 to 65535");
  for (char c : port) {
    if (c < '0' || c > '9') return bad("the port is not a number from 1 to 65535");
    value = value * 10 + (c - '0');
  }
  if (value > 65535 || (value == 0 && !port_zero_ok)) {
    return bad("the port is not a number from 1 to 65535");
  }
  return Status::ok();
}

bool tcp_address_taken(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  int number = 0;
  std::from_chars(port.data(), port.data() + port.size(), number);
  if (number == 0) return false;
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return false;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  for (const addrinfo* each = found; each != nullptr; each = each->ai_next) {
    UniqueFd fd(::socket(each->ai_family, each->ai_socktype | SOCK_CLOEXEC, each->ai_protocol));
    if (!fd.valid()) continue;
    int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (::bind(fd.get(), each->ai_addr, each->ai_addrlen) != 0 && errno == EADDRINUSE) return true;
  }
  return false;
}

Status prepare_socket_path(const std::string& path) {
  ROSETCTL_RETURN_IF_ERROR(make_parent_directory(path));
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", path));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return error(Code::kFailedPrecondition, "\"{}\" exists and is not a socket; not replacing it",
                 path);
  }
  if (someone_listens(path)) {
    return error(Code::kFailedPrecondition, "another server is already listening on \"{}\"", path);
  }
  spdlog::info("removing stale socket \"{}\"", path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return errno_status(errno, fmt::format("cannot remove stale socket \"{}\"", path));
  }
  return Status::ok();
}

namespace {

// SIGHUP: the TLS files are read again now rather than at the next poll; a new certificate
// (rosetctl tls issue --force) is shown to the next client. Paths only are logged.
void reload_tls(Plugin& plugin, const std::vector<std::string>& tcp, const TlsFiles& tls,
                std::chrono::milliseconds grace) {
  if (tcp.empty()) {
    spdlog::info("received SIGHUP: no --listen, no TLS files to reload");
    return;
  }
  spdlog::info("received SIGHUP: reloading the TLS files ({}, {}, {})", tls.certificate, tls.key,
               tls.ca);
  Status reloaded = plugin.reload_tls(grace);
  if (reloaded) {
    spdlog::info("TLS files reloaded: new connections on {} use them", fmt::join(tcp, ", "));
  } else {
    spdlog::error("kept the TLS files in use: {}", reloaded.message());
  }
}

}  // namespace

namespace {

sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reload the TLS files now
  return signals;
}

}  // namespace

void block_stop_signals() {
  sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

Status serve_until_signalled(Plugin& plugin, const std::string& socket_path,
                             const std::vector<std::string>& tcp, const TlsFiles& tls,
                             std::chrono::milliseconds grace) {
  // Blocked already when `serve` called block_stop_signals() first; again for any other caller.
  block_stop_signals();
  sigset_t signals = stop_signals();
  // Two malloc arenas, not one per core times eight: serve's threads mostly wait, and every
  // arena keeps its own high-water mark of private memory.
  ::mallopt(M_ARENA_MAX, 2);

  ROSETCTL_RETURN_IF_ERROR(prepare_socket_path(socket_path));
  // The socket appears with these permissions; no window where it is world-accessible.
  mode_t old_umask = ::umask(0117);
  std::vector<int> ports;
  Status started = plugin.start(socket_path, tcp, tls, &ports);
  ::umask(old_umask);
  ROSETCTL_RETURN_IF_ERROR(started);
  if (::chmod(socket_path.c_str(), 0660) != 0) {
    return errno_status(errno, fmt::format("cannot set mode 0660 on \"{}\"", socket_path));
  }
  spdlog::info("serving CSI {} as \"{}\" (node \"{}\", version {}) on unix://{}", "v1.10",
               plugin.options().driver_name, plugin.options().node_id, kVersion, socket_path);
  for (size_t i = 0; i < tcp.size(); ++i) {
    std::string where = tcp[i].substr(0, tcp[i].rfind(':'));
    spdlog::info("listening on {}:{} (mutual TLS)", where, ports[i]);
  }

  // The controller keeps volumes' replicas on other nodes (`volume replicate`): its rounds call
  // this serve's own services in process, as the CLI on this host would. Stopped before the
  // services, so that a round in progress is cancelled rather than failed by the shutdown.
  std::optional<ReplicaLoop> replicas;
  if (plugin.options().role != PluginRole::kNode) {
    replicas.emplace(plugin.store(), plugin.in_process_channel());
  }

  // Idle between signals, hand what a burst of calls left back to the system: database
  // connections opened for it, and freed heap, which keeps its high-water mark otherwise;
  // serve runs for weeks beside the workloads.
  int received = 0;
  const struct timespec trim_every = {1, 0};
  while ((received = sigtimedwait(&signals, nullptr, &trim_every)) < 0 || received == SIGHUP) {
    if (received == SIGHUP) {
      reload_tls(plugin, tcp, tls, grace);
      continue;
    }
    if (errno != EAGAIN) continue;
    plugin.store().close_idle_connections(std::chrono::seconds(1));
    ::malloc_trim(0);
  }
  spdlog::info("received {}, finishing in-flight calls (up to {} ms)", strsignal(received),
               grace.count());
  replicas.reset();
  plugin.shutdown(grace);
  ::unlink(socket_path.c_str());
  spdlog::info("stopped");
  return Status::ok();
}

}  // namespace rosetctl
