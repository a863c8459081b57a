// A node's side of placement: a request that reaches this plugin's own services (Controller,
// Node, NodeState) naming one of this node's placed ids (cluster/placed_id.h; kubelet's
// NodeStageVolume with a volume the controller placed here, the CLI's connect) has them turned
// into the local ids before any handler sees it. One gRPC server interceptor instead of a
// translation in every handler: the handlers stay the code that runs without placement.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>
#include <vector>

namespace rosetctl {

// `node`: this plugin's node id. `typed_node_services`: whether this server serves Node and
// NodeState itself (not role controller, whose proxy forwards their bytes untouched).
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
placed_id_interceptors(std::string node, bool typed_node_services);

}  // namespace rosetctl
