// The Node and NodeState services a serve registers: this host's (daemon/node_service.h,
// daemon/node_state_service.h), in front of which a call naming another node is forwarded
// there first (node_forward.h), as the routing controller does for the Controller service. A
// call naming no node, or this one, is the same call answered here.
#pragma once

#include "cluster/cluster_context.h"
#include "daemon/handler_pool.h"
#include "daemon/node_service.h"
#include "daemon/node_state_service.h"

namespace rosetctl {

class RoutedNode final : public NodeService {
 public:
  RoutedNode(ClusterContext& context, HandlerPool& handlers)
      : NodeService(context, handlers), cluster_(context) {}

  grpc::ServerUnaryReactor* NodeStageVolume(Request*, const csi::v1::NodeStageVolumeRequest*,
                                            csi::v1::NodeStageVolumeResponse*) override;
  grpc::ServerUnaryReactor* NodeUnstageVolume(Request*, const csi::v1::NodeUnstageVolumeRequest*,
                                              csi::v1::NodeUnstageVolumeResponse*) override;
  grpc::ServerUnaryReactor* NodePublishVolume(Request*, const csi::v1::NodePublishVolumeRequest*,
                                              csi::v1::NodePublishVolumeResponse*) override;
  grpc::ServerUnaryReactor* NodeUnpublishVolume(Request*,
                                                const csi::v1::NodeUnpublishVolumeRequest*,
                                                csi::v1::NodeUnpublishVolumeResponse*) override;
  grpc::ServerUnaryReactor* NodeGetVolumeStats(Request*, const csi::v1::NodeGetVolumeStatsRequest*,
                                               csi::v1::NodeGetVolumeStatsResponse*) override;
  grpc::ServerUnaryReactor* NodeExpandVolume(Request*, const csi::v1::NodeExpandVolumeRequest*,
                                             csi::v1::NodeExpandVolumeResponse*) override;
  grpc::ServerUnaryReactor* NodeGetCapabilities(Request*,
                                                const csi::v1::NodeGetCapabilitiesRequest*,
                                                csi::v1::NodeGetCapabilitiesResponse*) override;
  grpc::ServerUnaryReactor* NodeGetInfo(Request*, const csi::v1::NodeGetInfoRequest*,
                                        csi::v1::NodeGetInfoResponse*) override;

 private:
  ClusterContext& cluster_;
};

class RoutedNodeState final : public NodeStateService {
 public:
  RoutedNodeState(ClusterContext& context, HandlerPool& handlers)
      : NodeStateService(context, handlers), cluster_(context) {}

  grpc::ServerUnaryReactor* GetNodeVolumes(Request*, const v1::GetNodeVolumesRequest*,
                                           v1::GetNodeVolumesResponse*) override;
  grpc::ServerUnaryReactor* ResolveTarget(Request*, const v1::ResolveTargetRequest*,
                                          v1::ResolveTargetResponse*) override;
  grpc::ServerWriteReactor<v1::HoldAttachLockResponse>* HoldAttachLock(
      Request*, const v1::HoldAttachLockRequest*) override;

 private:
  ClusterContext& cluster_;
};

}  // namespace rosetctl
