// CSI Node: staging (node_service.cc) and publishing (node_publish.cc) volumes on this host,
// stats and expansion (node_stats.cc), and node identity. A serve registers it behind the
// cluster's routing (a call naming another node is forwarded there first): this class answers
// only for this host.
#pragma once

#include "csi.grpc.pb.h"
#include "daemon/handler_pool.h"
#include "daemon/service_context.h"

namespace rosetctl {

class NodeService : public csi::v1::Node::CallbackService {
 public:
  NodeService(ServiceContext& context, HandlerPool& handlers)
      : context_(context), handlers_(handlers) {}

  using Request = grpc::CallbackServerContext;
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
  Status stage_volume(const csi::v1::NodeStageVolumeRequest& request);
  Status unstage_volume(const csi::v1::NodeUnstageVolumeRequest& request);
  Status publish_volume(const csi::v1::NodePublishVolumeRequest& request);
  Status unpublish_volume(const csi::v1::NodeUnpublishVolumeRequest& request);
  Status volume_stats(const csi::v1::NodeGetVolumeStatsRequest& request,
                      csi::v1::NodeGetVolumeStatsResponse* response);
  Status expand_volume(const csi::v1::NodeExpandVolumeRequest& request,
                       csi::v1::NodeExpandVolumeResponse* response);

  ServiceContext& context_;
  HandlerPool& handlers_;
};

}  // namespace rosetctl
