// CSI Identity: who this plugin is, what it offers, and whether it is ready.
#pragma once

#include "csi.grpc.pb.h"
#include "daemon/service_context.h"

namespace rosetctl {

class IdentityService final : public csi::v1::Identity::Service {
 public:
  explicit IdentityService(ServiceContext& context) : context_(context) {}

  grpc::Status GetPluginInfo(grpc::ServerContext*, const csi::v1::GetPluginInfoRequest* request,
                             csi::v1::GetPluginInfoResponse* response) override;
  grpc::Status GetPluginCapabilities(grpc::ServerContext*,
                                     const csi::v1::GetPluginCapabilitiesRequest* request,
                                     csi::v1::GetPluginCapabilitiesResponse* response) override;
  grpc::Status Probe(grpc::ServerContext*, const csi::v1::ProbeRequest* request,
                     csi::v1::ProbeResponse* response) override;

 private:
  ServiceContext& context_;
};

}  // namespace rosetctl
