// Identity RPCs. Probe really checks the state store and every provider.
#include "daemon/identity_service.h"

#include <fmt/ranges.h>

#include "core/version.h"
#include "daemon/call_log.h"

namespace rosetctl {

grpc::ServerUnaryReactor* IdentityService::GetPluginInfo(
    grpc::CallbackServerContext* call, const csi::v1::GetPluginInfoRequest* request,
    csi::v1::GetPluginInfoResponse* response) {
  return answer_now(call, "GetPluginInfo", request, response, [&] {
    response->set_name(context_.options.driver_name);
    response->set_vendor_version(kVersion);
    auto& manifest = *response->mutable_manifest();
    manifest["git_commit"] = kGitCommit;
    manifest["build_type"] = kBuildType;
    manifest["compiler"] = kCompiler;
    manifest["providers"] = fmt::format("{}", fmt::join(context_.providers.names(), ","));
    return Status::ok();
  });
}

grpc::ServerUnaryReactor* IdentityService::GetPluginCapabilities(
    grpc::CallbackServerContext* call, const csi::v1::GetPluginCapabilitiesRequest* request,
    csi::v1::GetPluginCapabilitiesResponse* response) {
  return answer_now(call, "GetPluginCapabilities", request, response, [&] {
    using Service = csi::v1::PluginCapability::Service;
    if (context_.options.role != PluginRole::kNode) {
      response->add_capabilities()->mutable_service()->set_type(Service::CONTROLLER_SERVICE);
    }
    response->add_capabilities()->mutable_service()->set_type(
        Service::VOLUME_ACCESSIBILITY_CONSTRAINTS);
    // Expanding a volume never needs it to be unpublished first.
    response->add_capabilities()->mutable_volume_expansion()->set_type(
        csi::v1::PluginCapability::VolumeExpansion::ONLINE);
    return Status::ok();
  });
}

Status IdentityService::check_ready(csi::v1::ProbeResponse* response) {
  if (Status readable = context_.store.check_readable(); !readable) {
    return error(Code::kFailedPrecondition, "state store is not usable: {}", readable.message());
  }
  for (const std::string& name : context_.providers.names()) {
    auto provider = context_.providers.by_name(name);
    if (!provider) return provider.status();
    if (Status health = (*provider)->check_health(); !health) {
      return error(Code::kFailedPrecondition, "provider \"{}\" is not healthy: {}", name,
                   health.message());
    }
  }
  response->mutable_ready()->set_value(true);
  return Status::ok();
}

bool IdentityService::checks_may_block() const {
  for (const std::string& name : context_.providers.names()) {
    auto provider = context_.providers.by_name(name);
    if (!provider || (*provider)->health_check_may_block()) return true;
  }
  return false;
}

grpc::ServerUnaryReactor* IdentityService::Probe(grpc::CallbackServerContext* call,
                                                 const csi::v1::ProbeRequest* request,
                                                 csi::v1::ProbeResponse* response) {
  // kubelet's liveness probe makes this call forever. Where every check is a look at local
  // files and the database (which a WAL reader never waits for), it is answered on gRPC's own
  // thread: handing it to the handler pool and back cost more than the checks (bench/README.md,
  // issue 35).
  if (!checks_may_block()) {
    return answer_now(call, "Probe", request, response,
                      [=, this] { return check_ready(response); });
  }
  return answer(handlers_, call, "Probe", request, response,
                [=, this] { return check_ready(response); });
}

}  // namespace rosetctl
