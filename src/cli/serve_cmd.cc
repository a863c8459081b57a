// Flags of `serve` and the hand-over to the daemon layer.
#include "cli/serve_cmd.h"

#include "cli/config_file.h"
#include "cli/node_announce.h"
#include "cli/node_marker.h"
#include "cli/serve_enroll.h"
#include "cli/session.h"
#include "cluster/node_heartbeat.h"
#include "cluster/serve.h"
#include "core/host_addresses.h"
#include "core/log.h"
#include "core/validate.h"
#include "daemon/server.h"

namespace rosetctl::cli {
namespace {

bool is_wildcard(std::string_view address) {
  return address.starts_with("0.0.0.0:") || address.starts_with("[::]:");
}

struct ServeOptions {
  std::string endpoint = "unix:///run/rosetctl/csi.sock";
  std::vector<std::string> listen;
  std::string advertise;  // the address the registry records; default: the first --listen
  std::string role = "all";
  int64_t max_volumes_per_node = 0;
  int grace_seconds = 30;
  double snapshot_wait_seconds = 2;
  std::string metrics_listen;  // "": no metrics endpoint
  EnrollOptions enroll;        // node certificates in Kubernetes (serve_enroll.h)
};

Status run_serve(const GlobalOptions& globals, const ServeOptions& options) {
  // Before any thread exists (daemon/server.h says why).
  block_stop_signals();
  setup_logging(globals.verbose ? Verbosity::kDebug : Verbosity::kNormal, /*long_running=*/true);
  // A stray /etc/rosetctl/config.toml changes defaults (the provider, the controller) silently
  // otherwise: the log says which file this serve took its settings from.
  spdlog::info("{}", config_file_text(globals.config_file, globals.config_file_read));
  auto socket = parse_unix_endpoint(options.endpoint);
  if (!socket) return socket.status();
  for (const std::string& address : options.listen)
    ROSETCTL_RETURN_IF_ERROR(check_tcp_address(address, "--listen", /*port_zero_ok=*/true));
  TlsFiles tls = tls_files(globals);
  if (!options.listen.empty()) ROSETCTL_RETURN_IF_ERROR(check_tls_files(tls, "--listen"));
  std::string advertise = options.advertise;
  if (!advertise.empty())
    ROSETCTL_RETURN_IF_ERROR(check_tcp_address(advertise, "--advertise", false));
  // What the registry records by default: where this node listens, when that is an address
  // others can dial (not a wildcard, not a port picked at start).
  if (advertise.empty() && !options.listen.empty() && !is_wildcard(options.listen.front()) &&
      check_tcp_address(options.listen.front(), "--listen", false))
    advertise = options.listen.front();
  // A node plugin in Kubernetes gets its certificate before anything uses the TLS files.
  std::string node_id = globals.node_id;
  if (node_id.empty() && !options.enroll.at.empty()) {
    auto name = host_name();
    if (!name) return name.status();
    node_id = *name;
  }
  auto renewal = enroll_this_node(options.enroll, globals, options.role, node_id);
  if (!renewal) return renewal.status();
  if (!globals.controller.empty()) {
    if (options.role == "controller") {
      return error(Code::kInvalidArgument,
                   "--controller names the controller a node registers with; a serve with "
                   "--role controller is the controller");
    }
    ROSETCTL_RETURN_IF_ERROR(check_tcp_address(globals.controller, "--controller", false));
    ROSETCTL_RETURN_IF_ERROR(check_tls_files(tls, "--controller"));
  }

  PluginOptions plugin_options = plugin_options_of(globals);
  plugin_options.max_volumes_per_node = options.max_volumes_per_node;
  plugin_options.role = options.role == "controller" ? PluginRole::kController
                        : options.role == "node"     ? PluginRole::kNode
                                                     : PluginRole::kAll;
  plugin_options.snapshot_wait =
      std::chrono::milliseconds(static_cast<int64_t>(options.snapshot_wait_seconds * 1000));
  std::shared_ptr<grpc::Channel> controller;
  if (!globals.controller.empty()) {
    controller = kept_channel(globals.controller, peer_channel_credentials(tls, "controller", ""));
    plugin_options.controller_channel = controller;              // other nodes, its proxy
    plugin_options.node_credentials = channel_credentials(tls);  // or directly, for a pull
  } else if (plugin_options.role != PluginRole::kNode && !options.listen.empty()) {
    // The controller itself dials a node with its own certificate to pull a snapshot from it
    // (a volume placed on this host from a node's snapshot; cluster/source_node.h).
    plugin_options.node_credentials = channel_credentials(tls);
  }
  auto plugin = Plugin::open(std::move(plugin_options));
  if (!plugin) return plugin.status();
  // Before the first call, so nothing a crash left behind is mistaken for live state. A failed
  // reconcile leaves things as they were; serving is still better than not.
  if (Status reconciled = (*plugin)->reconcile(); !reconciled) {
    spdlog::error("startup reconcile failed: {}", escape_text(reconciled.message()));
  }
  if (!options.metrics_listen.empty()) {
    auto port = (*plugin)->serve_metrics(options.metrics_listen);
    if (!port) return port.status();
    std::string host = options.metrics_listen.substr(0, options.metrics_listen.rfind(':'));
    spdlog::info("metrics on http://{}:{}/metrics", host, *port);
  }
  auto enrollment = start_enrollment(options.enroll, globals, options.role,
                                     answering_server((*plugin)->options()));
  if (!enrollment) return enrollment.status();
  // Whether this state directory is a node's, for this host's CLI without --controller (it
  // then says its lists are this host's alone, naming the controller). Not fatal: serving
  // matters more than that note.
  const std::string& state_dir = (*plugin)->layout().root;
  if (Status recorded =
          globals.controller.empty()
              ? remove_node_marker(state_dir)
              : write_node_marker(state_dir, {(*plugin)->options().node_id, globals.controller});
      !recorded) {
    spdlog::warn("{}", escape_text(recorded.message()));
  }
  std::unique_ptr<NodeHeartbeat> heartbeat;
  if (!globals.controller.empty()) {
    auto registration = node_registration((*plugin)->options().node_id, advertise);
    if (!registration) return registration.status();
    heartbeat =
        std::make_unique<NodeHeartbeat>(controller, globals.controller, std::move(*registration));
  }
  return serve_until_signalled(**plugin, *socket, options.listen, tls,
                               std::chrono::seconds(options.grace_seconds));
}

}  // namespace

void setup_serve(CLI::App& app, const GlobalOptions& globals, Action& action) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* serve =
      app.add_subcommand("serve", "Run as a CSI v1.10 plugin (Identity, Controller, Node)");
  serve
      ->add_option("--endpoint,-e", options->endpoint,
                   "The CSI socket kubelet and the sidecars use: unix:///path/to/csi.sock")
      ->envname("CSI_ENDPOINT")
      ->capture_default_str();
  serve
      ->add_option("--listen", options->listen,
                   "Also listen on TCP at ADDR:PORT (repeatable; [IPV6]:PORT; port 0 picks one), "
                   "with mutual TLS: needs --tls-cert, --tls-key and --tls-ca")
      ->type_name("ADDR:PORT");
  serve
      ->add_option("--advertise", options->advertise,
                   "With --controller: the address the controller's registry records for this "
                   "node (default: the first --listen unless it is a wildcard address)")
      ->type_name("HOST:PORT");
  serve->add_option("--role", options->role, "Which services to offer")
      ->check(CLI::IsMember({"all", "controller", "node"}))
      ->capture_default_str();
  serve
      ->add_option("--max-volumes-per-node", options->max_volumes_per_node,
                   "Reported by NodeGetInfo and enforced by ControllerPublish (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve
      ->add_option("--grace-period", options->grace_seconds,
                   "Seconds in-flight calls may take to finish after SIGTERM/SIGINT")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  serve
      ->add_option("--snapshot-wait", options->snapshot_wait_seconds,
                   "Seconds CreateSnapshot waits for a commit before answering ready_to_use=false "
                   "(the commit goes on; ListSnapshots says when it is ready)")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  serve
      ->add_option("--metrics-listen", options->metrics_listen,
                   "Serve Prometheus metrics at http://ADDR:PORT/metrics (plain HTTP; off by "
                   "default; port 0 picks one)")
      ->type_name("ADDR:PORT");
  add_enroll_flags(*serve, options->enroll);
  serve->footer(
      "The socket is created with mode 0660; a stale socket file is replaced, a live one is not.\n"
      "A TCP listener (--listen) requires a client certificate of the same CA on every\n"
      "connection (there is no plaintext TCP); the certificate's role decides what a caller may\n"
      "do (docs/guides/across-hosts.md). Replaced certificate files are used within 10 s.\n"
      "Logs go to stderr, one line per call; -v adds request and response bodies with every\n"
      "secret redacted.\n\n"
      "Example:\n  rosetctl serve --endpoint "
      "unix:///var/lib/kubelet/plugins/io.roset.csi/csi.sock");
  serve->callback([&globals, &action, options] {
    action = [&globals, options] { return run_serve(globals, *options); };
  });
}

}  // namespace rosetctl::cli
