// The plugin: state store, providers, the three CSI services and our own (Registry, Catalog,
// NodeState) behind one gRPC server.
// The CLI talks to it through gRPC's in-process channel; `serve` also listens on a socket.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/catalog_service.h"
#include "daemon/controller_service.h"
#include "daemon/handler_pool.h"
#include "daemon/identity_service.h"
#include "daemon/node_proxy.h"
#include "daemon/node_service.h"
#include "daemon/node_state_service.h"
#include "daemon/registry_service.h"
#include "daemon/service_context.h"
#include "daemon/tls_files.h"

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
  // Startup reconcile (daemon/reconcile.h): undoes what a crash left on this node.
  Status reconcile();
  // Stops taking calls, lets in-flight calls finish until `grace` has passed.
  void shutdown(std::chrono::milliseconds grace);

  const PluginOptions& options() const { return context_->options; }
  const StateLayout& layout() const { return context_->layout; }
  StateStore& store() { return *store_; }
  ProviderRegistry& providers() { return *providers_; }

 private:
  Plugin() = default;

  std::unique_ptr<StateStore> store_;
  std::unique_ptr<ProviderRegistry> providers_;
  std::unique_ptr<ServiceContext> context_;
  std::unique_ptr<IdentityService> identity_;
  std::unique_ptr<ControllerService> controller_;
  std::unique_ptr<NodeService> node_;
  std::unique_ptr<NodeStateService> node_state_;  // rosetctl.v1.NodeState, beside the node
  std::unique_ptr<NodeProxy> proxy_;              // calls for a node, forwarded to it
  std::unique_ptr<CatalogService> catalog_;       // rosetctl.v1.Catalog, beside the controller
  std::unique_ptr<RegistryService> registry_;     // rosetctl.v1.Registry, beside the controller
  // After the services, before the server: destroyed once the server has stopped (no new
  // work) and before the services its handlers use.
  std::unique_ptr<HandlerPool> handlers_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace rosetctl
