// The controller's proxy to its nodes (OIM's registry proxy): a call for a service this server
// does not offer (a controller offers no Node service) that names a node in the metadata key
// `rosetctl-node` is forwarded, bytes unchanged, to that node's registered address over mutual
// TLS with the controller's certificate, and the node's answer comes back. So an operator on
// the controller runs `rosetctl --controller ... --on-node N volume stats VOL` through the one
// TLS listener, and the node answers with the same CSI call it answers kubelet.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cluster/cluster_context.h"
#include "cluster/tls_files.h"

namespace rosetctl {

class NodeProxy final : public grpc::CallbackGenericService {
 public:
  // `tls`: the controller's own files, shown to the nodes; none: nothing can be forwarded.
  // `own_objects`: a channel to this host's own ObjectStore (Plugin), for the reading calls that
  // name this host's node id: a node pulls a snapshot of this host as from any node. Null: such
  // calls are refused as for a node that is not registered.
  NodeProxy(ClusterContext& context, TlsFiles tls,
            std::shared_ptr<grpc::Channel> own_objects = nullptr)
      : context_(context), tls_(std::move(tls)), own_objects_(std::move(own_objects)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* call) override;

  ClusterContext& context() { return context_; }

  // The channel to a node's address (one per address, kept); UNAVAILABLE saying why there is
  // none. Also the authorization of the caller for `node_id`.
  Expected<std::shared_ptr<grpc::Channel>> route(const grpc::ServerContextBase& call,
                                                 const std::string& method,
                                                 const std::string& node_id);

 private:
  ClusterContext& context_;
  TlsFiles tls_;
  std::shared_ptr<grpc::Channel> own_objects_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // by node@address; mutex_
};

}  // namespace rosetctl
