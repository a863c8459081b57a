// serve's wait for signals (serve.h).
#include "cluster/serve.h"

#include <fmt/ranges.h>
#include <malloc.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "cluster/replica_loop.h"
#include "core/version.h"
#include "daemon/server.h"

namespace rosetctl {
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
