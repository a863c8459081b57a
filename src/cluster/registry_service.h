// rosetctl.v1.Registry: the nodes this controller serves, kept in its state database. A node
// registers itself (idempotently) and is then a valid target of ControllerPublishVolume. Its
// iSCSI initiator name is stored in its normal form and is its alone; when it changes, the ACLs
// of the volumes published to the node move to the new name (daemon/node_mapping.h).
#pragma once

#include "cluster/cluster_context.h"
#include "daemon/handler_pool.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

class RegistryService final : public v1::Registry::CallbackService {
 public:
  RegistryService(ClusterContext& context, HandlerPool& handlers)
      : context_(context), handlers_(handlers) {}

  using Request = grpc::CallbackServerContext;
  grpc::ServerUnaryReactor* RegisterNode(Request*, const v1::RegisterNodeRequest*,
                                         v1::RegisterNodeResponse*) override;
  grpc::ServerUnaryReactor* GetNode(Request*, const v1::GetNodeRequest*,
                                    v1::GetNodeResponse*) override;
  grpc::ServerUnaryReactor* TouchNode(Request*, const v1::TouchNodeRequest*,
                                      v1::TouchNodeResponse*) override;
  grpc::ServerUnaryReactor* ListNodes(Request*, const v1::ListNodesRequest*,
                                      v1::ListNodesResponse*) override;
  grpc::ServerUnaryReactor* RemoveNode(Request*, const v1::RemoveNodeRequest*,
                                       v1::RemoveNodeResponse*) override;
  grpc::ServerUnaryReactor* CheckTransferGrant(Request*, const v1::CheckTransferGrantRequest*,
                                               v1::CheckTransferGrantResponse*) override;
  grpc::ServerUnaryReactor* CordonNode(Request*, const v1::CordonNodeRequest*,
                                       v1::CordonNodeResponse*) override;

 private:
  Status check_address_free(const std::string& node_id, const std::string& address) const;
  Status register_node(const v1::RegisterNodeRequest& request, v1::RegisterNodeResponse* response);
  Status get_node(const v1::GetNodeRequest& request, v1::GetNodeResponse* response);
  Status touch_node(const v1::TouchNodeRequest& request, v1::TouchNodeResponse* response);
  Status list_nodes(v1::ListNodesResponse* response);
  Status remove_node(const v1::RemoveNodeRequest& request, v1::RemoveNodeResponse* response);
  Status check_transfer_grant(const grpc::ServerContextBase& call,
                              const v1::CheckTransferGrantRequest& request,
                              v1::CheckTransferGrantResponse* response);
  Status cordon_node(const v1::CordonNodeRequest& request, v1::CordonNodeResponse* response);
  Expected<NodeRecord> registered_as(const std::string& id);

  ClusterContext& context_;
  HandlerPool& handlers_;
};

}  // namespace rosetctl
