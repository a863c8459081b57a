// The plugin: state store, providers, the three CSI services and our own (Registry, Catalog,
// NodeState, ObjectStore) behind a gRPC server (and, with TCP listeners, a second one for them,
// so TLS can be reloaded).
// The CLI talks to it through gRPC's in-process channel; `serve` also listens on a socket.
// The assembly of one process: this host's services (daemon/) with the cluster's parts in front
// of them and beside them (the routing, the authorization gate, remote content sources), which
// is why it lives here and daemon/ includes nothing of this folder.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_context.h"
#include "cluster/node_proxy.h"
#include "cluster/node_routes.h"
#include "cluster/object_store_service.h"
#include "cluster/registry_service.h"
#include "cluster/routing_catalog.h"
#include "cluster/routing_controller.h"
#include "cluster/tls_files.h"
#include "daemon/controller_service.h"
#include "daemon/handler_pool.h"
#include "daemon/host_checks.h"
#include "daemon/identity_service.h"
#include "daemon/metrics.h"
#include "daemon/metrics_endpoint.h"

namespace rosetctl {

class Plugin {
 public:
  // Opens (and creates) the state directory and database, builds providers. Fills in the node
  // id from the host name when none is given.
  static Expected<std::unique_ptr<Plugin>> open(PluginOptions options);
  ~Plugin();

  // Starts the services; with `unix_socket`, also listens there (the file must be free: see
  // server.h for how `serve` prepares it); on each of `tcp` ("ADDR:PORT"), with mutual TLS
  // from `tls`. Fills `tcp_ports` with the ports bound (a listener asked for port 0 gets one).
  Status start(const std::optional<std::string>& unix_socket,
               const std::vector<std::string>& tcp = {}, const TlsFiles& tls = {},
               std::vector<int>* tcp_ports = nullptr);
  // A channel to the running services within this process.
  std::shared_ptr<grpc::Channel> in_process_channel();
  // Startup reconcile (daemon/reconcile.h): undoes what a crash left on this node (the node
  // side only where this serve is a node: --role node or all).
  Status reconcile();
  // Stops taking calls, lets in-flight calls finish until `grace` has passed.
  void shutdown(std::chrono::milliseconds grace);
  // Reads the TLS files again now (serve's SIGHUP; gRPC also polls them every 10 s): new TCP
  // listeners with the new certificates take the same ports, then the old ones stop taking
  // connections and their calls in flight get `grace` to finish. A file that does not check
  // (tls_files.h) keeps the old listeners serving and is the error. OK without TCP listeners.
  Status reload_tls(std::chrono::milliseconds grace);
  // `doctor`: this host's checks, and with options.fix its repair (daemon/host_checks.h).
  std::vector<HostCheck> check_host(const HostCheckOptions& options) {
    return rosetctl::check_host(*context_, options);
  }
  // Serves GET /metrics on `address` (daemon/metrics_endpoint.h) until shutdown; returns the
  // port bound (port 0 picks one).
  Expected<int> serve_metrics(const std::string& address);
  // The page /metrics serves now (daemon/metrics.h).
  std::string metrics_text() { return rosetctl::metrics_text(*context_); }

  const PluginOptions& options() const { return context_->options; }
  const StateLayout& layout() const { return context_->layout; }
  StateStore& store() { return *store_; }
  ProviderRegistry& providers() { return *providers_; }

 private:
  Plugin() = default;

  std::unique_ptr<StateStore> store_;
  std::unique_ptr<ProviderRegistry> providers_;
  std::unique_ptr<ClusterContext> context_;
  std::unique_ptr<IdentityService> identity_;
  std::unique_ptr<NodeControllers> node_controllers_;  // the controller's calls to its nodes
  std::unique_ptr<ControllerService> controller_;      // this host's answers
  std::unique_ptr<RoutingController> routing_;  // the Controller service: where each call goes
  std::unique_ptr<RoutedNode> node_;  // this host's Node service; calls for others forwarded
  // The TCP listeners with mutual TLS: a server of their own, replaced whole by reload_tls().
  struct TcpServer {
    std::unique_ptr<NodeProxy> proxy;  // a generic service belongs to one server
    std::unique_ptr<grpc::Server> server;
  };
  Expected<TcpServer> start_tcp(const std::vector<std::string>& addresses, std::vector<int>* ports);
  void register_services(grpc::ServerBuilder& builder, NodeProxy& proxy);

  std::unique_ptr<RoutedNodeState> node_state_;  // rosetctl.v1.NodeState, beside the node
  std::unique_ptr<ObjectStoreService> objects_;  // rosetctl.v1.ObjectStore, beside the node
  std::unique_ptr<NodeProxy> proxy_;             // calls for a node, forwarded to it
  std::unique_ptr<RoutingCatalog> catalog_;      // rosetctl.v1.Catalog, beside the controller
  std::unique_ptr<RegistryService> registry_;    // rosetctl.v1.Registry, beside the controller
  // After the services, before the server: destroyed once the server has stopped (no new
  // work) and before the services its handlers use.
  std::unique_ptr<HandlerPool> handlers_;
  std::unique_ptr<grpc::Server> server_;  // the unix socket and the in-process channel
  // On a controller (which serves no ObjectStore of its own, so that ObjectStore calls naming
  // a node go to the proxy): its own commit store's ObjectStore on a server without listeners,
  // which the proxies reach in process for the reading calls naming this host (node_proxy.h).
  std::unique_ptr<grpc::Server> own_objects_;
  std::shared_ptr<grpc::Channel> own_objects_channel_;
  std::mutex tcp_mutex_;  // guards tcp_ against reload_tls() for ClusterContext::route_to_node
  TcpServer tcp_;         // guarded by tcp_mutex_ where route_to_node reads it
  std::vector<std::string> tcp_addresses_;  // as bound: "ADDR:PORT" with the port picked
  TlsFiles tls_;
  std::unique_ptr<MetricsEndpoint> metrics_;  // with --metrics-listen; reads the context
};

}  // namespace rosetctl
