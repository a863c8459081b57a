// A node's publish secrets, kept by the controller; see publish_secrets.h.
#include "daemon/publish_secrets.h"

#include "core/validate.h"
#include "daemon/grpc_status.h"
#include "daemon/volume_lookup.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {
namespace {

constexpr auto kFetchDeadline = std::chrono::seconds(30);

}  // namespace

Expected<StringMap> publish_secrets_here(const ServiceContext& context, std::string_view volume_id,
                                         std::string_view node_id) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(volume_id));
  if (node_id.empty()) return error(Code::kInvalidArgument, "node_id is required");
  ROSETCTL_RETURN_IF_ERROR(validate_name(node_id, "node_id"));
  auto volume = load_volume(context, volume_id);
  if (!volume) return volume.status();
  auto publication = context.store.find_controller_publication(volume_id, node_id);
  if (!publication) return publication.status();
  if (!publication->has_value()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is not published to node \"{}\", so the controller gives that "
                 "node none of its secrets; publish it there first (ControllerPublishVolume; from "
                 "a shell: rosetctl volume connect on the node)",
                 volume->record.name, node_id);
  }
  auto controller = controller_side(*volume->provider);
  if (!controller) return controller.status();
  auto registered = context.store.find_node(node_id);
  if (!registered) return registered.status();
  NodeRecord node;
  if (registered->has_value()) {
    node = std::move(**registered);
  } else {
    node.node_id = std::string(node_id);  // the controller's own node needs no registration
  }
  return (*controller)->publish_secrets(volume->record, node);
}

Expected<StringMap> fetch_publish_secrets(const ServiceContext& context,
                                          std::string_view volume_id) {
  const std::string& node_id = context.options.node_id;
  if (!context.options.controller_channel) {
    auto here = context.store.find_volume(volume_id);
    if (!here) return here.status();
    // A node plugin with no controller to ask (kubelet's, deployed without --controller) has
    // only the request's own secrets (a StorageClass's node-stage secret): the provider says
    // what is missing when they are not enough.
    if (!here->has_value()) return StringMap{};
    return publish_secrets_here(context, volume_id, node_id);
  }
  auto catalog = v1::Catalog::NewStub(context.options.controller_channel);
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + kFetchDeadline);
  // Waits out a channel that is reconnecting (a controller just restarted) within the deadline,
  // rather than failing the stage at once with UNAVAILABLE.
  call.set_wait_for_ready(true);
  v1::GetPublishSecretsRequest request;
  request.set_volume_id(std::string(volume_id));
  request.set_node_id(node_id);
  v1::GetPublishSecretsResponse response;
  grpc::Status status = catalog->GetPublishSecrets(&call, request, &response);
  if (!status.ok()) {
    return from_grpc(status).with_context(fmt::format(
        "asking the controller for node \"{}\"'s secrets of volume \"{}\"", node_id, volume_id));
  }
  return StringMap(response.secrets().begin(), response.secrets().end());
}

}  // namespace rosetctl
