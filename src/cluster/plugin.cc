// Wiring of the plugin's parts.
#include "cluster/plugin.h"

#include <absl/synchronization/mutex.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <utility>

#include "cluster/authorization.h"
#include "cluster/placed_interceptor.h"
#include "cluster/remote_sources.h"
#include "core/full_filesystem.h"
#include "core/host_addresses.h"
#include "core/validate.h"
#include "daemon/grpc_logging.h"
#include "daemon/reconcile.h"
#include "daemon/server.h"

namespace rosetctl {
namespace {

// CSI driver names: at most 63 characters of alphanumerics, '-' and '.'. The spec lets them
// start and end with a digit; conformance suites (csi-sanity) insist on a letter, so we do too.
Status validate_driver_name(std::string_view name) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  bool ok = name.size() >= 2 && name.size() <= 63 && alpha(name.front()) && alpha(name.back());
  for (char c : name)
    ok = ok && (alnum(c) || c == '-' || c == '.');
  if (ok) return Status::ok();
  return error(Code::kInvalidArgument,
               "driver name \"{}\" must be 2-63 characters of letters, digits, '-' and '.', "
               "starting and ending with a letter",
               name.substr(0, 80));
}

Status cannot_listen(const std::string& address) {
  return error(Code::kUnavailable,
               "cannot listen on {}: the address is not one of this host's, or the port is taken",
               address);
}

}  // namespace

Expected<std::unique_ptr<Plugin>> Plugin::open(PluginOptions options) {
  ROSETCTL_RETURN_IF_ERROR(validate_driver_name(options.driver_name));
  if (options.node_id.empty()) {
    auto name = host_name();
    if (!name) return name.status();
    options.node_id = *name;
  }
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.node_id, "node id"));
  if (options.max_volumes_per_node < 0) {
    return error(Code::kInvalidArgument, "max volumes per node must not be negative");
  }

  auto root = normalize_absolute_path(options.state_dir, "state directory");
  if (!root) return root.status();
  StateLayout layout{*root};
  ROSETCTL_RETURN_IF_ERROR(layout.ensure_directories());
  // Mount tables show resolved paths; resolve the root once so path checks compare like with like.
  char resolved[PATH_MAX];
  if (::realpath(layout.root.c_str(), resolved) == nullptr) {
    return errno_status(errno, fmt::format("cannot resolve state directory \"{}\"", layout.root));
  }
  layout.root = resolved;

  std::unique_ptr<Plugin> plugin(new Plugin());
  auto store =
      StateStore::open(layout.root, options.one_command ? StateStore::Lifetime::kOneCommand
                                                        : StateStore::Lifetime::kLongRunning);
  if (!store) return store.status();
  plugin->store_ = std::move(*store);
  auto providers = ProviderRegistry::create(layout, *plugin->store_,
                                            {.default_provider = options.default_provider,
                                             .capacity_overcommit = options.capacity_overcommit,
                                             .node_role = options.role != PluginRole::kController,
                                             .controller_role = options.role != PluginRole::kNode,
                                             .by_provider = options.provider_settings});
  if (!providers) return providers.status();
  plugin->providers_ = std::move(*providers);
  auto locks = LockSpace::open(layout.lock_file());
  if (!locks) return locks.status();

  plugin->context_.reset(new ClusterContext{
      {std::move(options), layout, *plugin->store_, *plugin->providers_, std::move(*locks)}});
  // What this host's services ask of the cluster: who may call (daemon/call_gate.h) and the
  // content sources other nodes hold (daemon/remote_sources.h).
  set_call_gate(authorization_gate());
  plugin->context_->remote_sources = std::make_shared<PlacedSources>();
  set_process_state_directory(layout.root);
  plugin->handlers_ = std::make_unique<HandlerPool>();
  plugin->identity_ = std::make_unique<IdentityService>(*plugin->context_, *plugin->handlers_);
  plugin->node_controllers_ = std::make_unique<NodeControllers>(*plugin->context_);
  plugin->controller_ = std::make_unique<ControllerService>(*plugin->context_);
  plugin->routing_ = std::make_unique<RoutingController>(
      *plugin->context_, *plugin->handlers_, *plugin->node_controllers_, *plugin->controller_);
  plugin->node_ = std::make_unique<RoutedNode>(*plugin->context_, *plugin->handlers_);
  plugin->node_state_ = std::make_unique<RoutedNodeState>(*plugin->context_, *plugin->handlers_);
  plugin->objects_ = std::make_unique<ObjectStoreService>(*plugin->context_, *plugin->handlers_);
  plugin->registry_ = std::make_unique<RegistryService>(*plugin->context_, *plugin->handlers_);
  plugin->catalog_ = std::make_unique<RoutingCatalog>(*plugin->context_, *plugin->handlers_,
                                                      *plugin->node_controllers_);
  return plugin;
}

Plugin::~Plugin() {
  shutdown(std::chrono::milliseconds(0));
}

Status Plugin::start(const std::optional<std::string>& unix_socket,
                     const std::vector<std::string>& tcp, const TlsFiles& tls,
                     std::vector<int>* tcp_ports) {
  // Debian builds abseil without NDEBUG, which leaves its lock-order deadlock detector on: every
  // absl::Mutex gRPC takes then updates a process-wide lock graph under a global lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  route_grpc_logs(!context_->options.one_command);
  if (!tcp.empty()) ROSETCTL_RETURN_IF_ERROR(check_tls_files(tls, "--listen"));
  // gRPC binds with SO_REUSEPORT, which reload_tls() needs, but which would also let this server
  // share a port another live serve (or any root process with SO_REUSEPORT) listens on, the
  // kernel splitting connections between the two. A bind without it finds such a listener. Only
  // here, before the first start: on a reload the listeners there are our own. Two serves started
  // within the same milliseconds may both pass; this is for one started beside a live one.
  for (const std::string& address : tcp) {
    if (tcp_address_taken(address)) return cannot_listen(address);
  }
  tls_ = tls;
  node_controllers_->set_tls(tls);
  // A serving controller that can reach its nodes takes up what killed clones left there.
  if (context_->options.role != PluginRole::kNode && !context_->options.one_command &&
      !tls.certificate.empty()) {
    routing_->collect_clone_leftovers_later();
  }
  if (context_->options.role == PluginRole::kController) {
    grpc::ServerBuilder own;
    own.RegisterService(objects_.get());
    // Reached in process only (by the proxies, which decided for the caller): local calls.
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> decide;
    decide.push_back(authorization_interceptor(
        {.node_id = context_->options.node_id, .controller = false, .node = true}));
    own.experimental().SetInterceptorCreators(std::move(decide));
    own_objects_ = own.BuildAndStart();
    if (!own_objects_) return error(Code::kUnavailable, "cannot start this host's ObjectStore");
    own_objects_channel_ = own_objects_->InProcessChannel(grpc::ChannelArguments());
  }
  grpc::ServerBuilder builder;
  if (unix_socket)
    builder.AddListeningPort("unix:" + *unix_socket, grpc::InsecureServerCredentials());
  proxy_ = std::make_unique<NodeProxy>(*context_, tls, own_objects_channel_);
  // Calls naming another node that reach this server's own Node, NodeState or ObjectStore
  // (role all) go where the proxy would send them: through the TLS listeners' proxy, whose
  // channels show the certificate of the last reload_tls().
  context_->route_to_node = [this](const grpc::ServerContextBase& call, const std::string& method,
                                   const std::string& node) {
    std::lock_guard<std::mutex> lock(tcp_mutex_);
    NodeProxy& proxy = tcp_.proxy ? *tcp_.proxy : *proxy_;
    return proxy.route(call, method, node);
  };
  register_services(builder, *proxy_);
  server_ = builder.BuildAndStart();
  if (!server_) {
    return error(Code::kUnavailable, "cannot start the gRPC server{}",
                 unix_socket ? fmt::format(" on unix socket \"{}\"", *unix_socket) : "");
  }
  if (tcp.empty()) return Status::ok();
  std::vector<int> ports;
  auto listening = start_tcp(tcp, &ports);
  if (!listening) {
    shutdown(std::chrono::milliseconds(0));
    return listening.status();
  }
  {
    std::lock_guard<std::mutex> lock(tcp_mutex_);
    tcp_ = std::move(*listening);
  }
  for (size_t i = 0; i < tcp.size(); ++i)
    tcp_addresses_.push_back(fmt::format("{}:{}", tcp[i].substr(0, tcp[i].rfind(':')), ports[i]));
  if (tcp_ports != nullptr) *tcp_ports = std::move(ports);
  return Status::ok();
}

void Plugin::register_services(grpc::ServerBuilder& builder, NodeProxy& proxy) {
  builder.RegisterService(identity_.get());
  // Whatever this server does not offer itself goes to the proxy, which forwards calls that
  // name a node (rosetctl-node) and explains the others.
  builder.RegisterCallbackGenericService(&proxy);
  // A node serves the Controller service too: its controller places `local` volumes on it
  // (cluster/node_controllers.h), and only the controller's certificate may call it there.
  builder.RegisterService(routing_.get());
  // The authorization of every call (cluster/authorization.h) and the placed ids. gRPC runs a
  // server's interceptors on what it receives last first, so the decision sees ids already
  // localized; it reads wrapped ids whole either way (placed_fields.h placed_nodes_of).
  auto interceptors = placed_id_interceptors(context_->options.node_id,
                                             context_->options.role != PluginRole::kController);
  // A controller refuses the certificates of revoked nodes (`node remove --revoke`).
  AnsweringServer answering = answering_server(context_->options);
  RevocationCheck revoked = answering.controller ? revocation_check_of(*store_) : nullptr;
  interceptors.insert(interceptors.begin(),
                      authorization_interceptor(std::move(answering), std::move(revoked)));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  // The Catalog too: a controller asks a node's about the volumes and snapshots placed there.
  builder.RegisterService(catalog_.get());
  if (context_->options.role != PluginRole::kNode) builder.RegisterService(registry_.get());
  if (context_->options.role != PluginRole::kController) {
    builder.RegisterService(node_.get());
    builder.RegisterService(node_state_.get());
    // Beside the Node service, not on a controller: there, ObjectStore calls naming a node are
    // the proxy's to forward.
    builder.RegisterService(objects_.get());
  }
}

Expected<Plugin::TcpServer> Plugin::start_tcp(const std::vector<std::string>& addresses,
                                              std::vector<int>* ports) {
  // A fresh provider reads the files now. gRPC sets SO_REUSEPORT, so a replacement binds the
  // ports its predecessor still holds (start() made sure nobody else held them first).
  auto credentials = server_credentials(tls_);
  grpc::ServerBuilder builder;
  ports->assign(addresses.size(), 0);
  for (size_t i = 0; i < addresses.size(); ++i)
    builder.AddListeningPort(addresses[i], credentials, &(*ports)[i]);
  TcpServer tcp;
  tcp.proxy = std::make_unique<NodeProxy>(*context_, tls_, own_objects_channel_);
  register_services(builder, *tcp.proxy);
  tcp.server = builder.BuildAndStart();
  if (!tcp.server) {
    return error(Code::kUnavailable, "cannot start the gRPC server on {}",
                 fmt::join(addresses, ", "));
  }
  for (size_t i = 0; i < addresses.size(); ++i) {
    if ((*ports)[i] == 0) {
      tcp.server->Shutdown(std::chrono::system_clock::now());
      tcp.server->Wait();
      return cannot_listen(addresses[i]);
    }
  }
  return tcp;
}

Status Plugin::reload_tls(std::chrono::milliseconds grace) {
  if (!tcp_.server) return Status::ok();
  ROSETCTL_RETURN_IF_ERROR(check_tls_files(tls_, "--listen"));
  std::vector<int> ports;
  auto replacement = start_tcp(tcp_addresses_, &ports);
  if (!replacement) return replacement.status();
  TcpServer old;
  {
    std::lock_guard<std::mutex> lock(tcp_mutex_);
    old = std::exchange(tcp_, std::move(*replacement));
  }
  old.server->Shutdown(std::chrono::system_clock::now() + grace);
  old.server->Wait();
  return Status::ok();
}

Status Plugin::reconcile() {
  if (context_->options.role != PluginRole::kNode) reconcile_controller(*context_);
  // A controller does not see the node's mounts (in Kubernetes it runs in another pod, without
  // kubelet's directory): it would take every staging for one a crash left behind and forget it.
  if (context_->options.role == PluginRole::kController) return Status::ok();
  return reconcile_node(*context_);
}

std::shared_ptr<grpc::Channel> Plugin::in_process_channel() {
  return server_->InProcessChannel(grpc::ChannelArguments());
}

Expected<int> Plugin::serve_metrics(const std::string& address) {
  auto endpoint = MetricsEndpoint::start(*context_, address);
  if (!endpoint) return endpoint.status();
  metrics_ = std::move(*endpoint);
  return metrics_->port();
}

void Plugin::shutdown(std::chrono::milliseconds grace) {
  auto deadline = std::chrono::system_clock::now() + grace;
  // Both stop taking calls first; then their calls in flight share the one grace period.
  if (tcp_.server) tcp_.server->Shutdown(deadline);
  if (server_) server_->Shutdown(deadline);
  if (tcp_.server) tcp_.server->Wait();
  if (server_) server_->Wait();
  // Last: the proxies' calls to it ended with theirs.
  if (own_objects_) {
    own_objects_->Shutdown(deadline);
    own_objects_->Wait();
  }
  tcp_.server.reset();
  server_.reset();
  own_objects_.reset();
  metrics_.reset();
}

}  // namespace rosetctl
