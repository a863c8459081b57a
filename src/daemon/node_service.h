// CSI Node: staging and publishing volumes on this host, stats, and node identity.
#pragma once

#include "csi.grpc.pb.h"
#include "daemon/service_context.h"

namespace rosetctl {

class NodeService final : public csi::v1::Node::Service {
 public:
  explicit NodeService(ServiceContext& context) : context_(context) {}

  using Request = grpc::ServerContext;
  grpc::Status NodeStageVolume(Request*, const csi::v1::NodeStageVolumeRequest*,
                               csi::v1::NodeStageVolumeResponse*) override;
  grpc::Status NodeUnstageVolume(Request*, const csi::v1::NodeUnstageVolumeRequest*,
                                 csi::v1::NodeUnstageVolumeResponse*) override;
  grpc::Status NodePublishVolume(Request*, const csi::v1::NodePublishVolumeRequest*,
                                 csi::v1::NodePublishVolumeResponse*) override;
  grpc::Status NodeUnpublishVolume(Request*, const csi::v1::NodeUnpublishVolumeRequest*,
                                   csi::v1::NodeUnpublishVolumeResponse*) override;
  grpc::Status NodeGetVolumeStats(Request*, const csi::v1::NodeGetVolumeStatsRequest*,
                                  csi::v1::NodeGetVolumeStatsResponse*) override;
  grpc::Status NodeExpandVolume(Request*, const csi::v1::NodeExpandVolumeRequest*,
                                csi::v1::NodeExpandVolumeResponse*) override;
  grpc::Status NodeGetCapabilities(Request*, const csi::v1::NodeGetCapabilitiesRequest*,
                                   csi::v1::NodeGetCapabilitiesResponse*) override;
  grpc::Status NodeGetInfo(Request*, const csi::v1::NodeGetInfoRequest*,
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
};

}  // namespace rosetctl
