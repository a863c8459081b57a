// CSI Identity: who this plugin is, what it offers, and whether it is ready.
#pragma once

#include "csi.grpc.pb.h"
#include "daemon/handler_pool.h"
#include "daemon/service_context.h"

namespace rosetctl {

class IdentityService final : public csi::v1::Identity::CallbackService {
 public:
  IdentityService(ServiceContext& context, HandlerPool& handlers)
      : context_(context), handlers_(handlers) {}

  grpc::ServerUnaryReactor* GetPluginInfo(grpc::CallbackServerContext*,
                                          const csi::v1::GetPluginInfoRequest* request,
                                          csi::v1::GetPluginInfoResponse* response) override;
  grpc::ServerUnaryReactor* GetPluginCapabilities(
      grpc::CallbackServerContext*, const csi::v1::GetPluginCapabilitiesRequest* request,
      csi::v1::GetPluginCapabilitiesResponse* response) override;
  grpc::ServerUnaryReactor* Probe(grpc::CallbackServerContext*,
                                  const csi::v1::ProbeRequest* request,
                                  csi::v1::ProbeResponse* response) override;

 private:
  // Probe's checks: the state store reads, every provider is healthy.
  Status check_ready(csi::v1::ProbeResponse* response);
  // Whether a provider's check may wait (provider.h health_check_may_block).
  bool checks_may_block() const;

  ServiceContext& context_;
  HandlerPool& handlers_;
};

}  // namespace rosetctl
