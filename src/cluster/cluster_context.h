// What the cluster's parts of one serve share beyond this host's ServiceContext
// (daemon/service_context.h), which it extends: the single-host services take it as their
// ServiceContext and see nothing of this.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/server_context.h>

#include <functional>
#include <memory>
#include <string>

#include "cluster/transfer_grants.h"
#include "daemon/service_context.h"

namespace rosetctl {

struct ClusterContext : ServiceContext {
  // The channel to registered node `node` for a call naming it that reached one of this
  // server's own services (node_forward.h); it authorizes the caller as the proxy does
  // (node_proxy.h). Set by Plugin::start; empty: no calls are forwarded.
  std::function<Expected<std::shared_ptr<grpc::Channel>>(
      const grpc::ServerContextBase& call, const std::string& method, const std::string& node)>
      route_to_node;
  // The transfer grants this host issued (a controller) or was told of by its controller (a
  // node a grant names as the source): transfer_grants.h.
  TransferGrants transfer_grants;
};

}  // namespace rosetctl
