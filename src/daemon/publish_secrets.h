// Secrets a controller keeps for one node's publication of a volume (an iscsi volume's CHAP
// credentials, made at ControllerPublishVolume): the controller answers them only for a node
// the volume is published to, and NodeStage fetches them over the node's own mutual TLS, so
// they never travel in a publish context, which COs keep in plain sight. One path either way:
// a node with a remote controller asks it (Catalog/GetPublishSecrets, whose handler is
// publish_secrets_here); a node whose controller is its own process asks it directly.
#pragma once

#include <string_view>

#include "core/status.h"
#include "daemon/service_context.h"

namespace rosetctl {

// The controller's side: the secrets of `node_id`'s publication of `volume_id`.
// FAILED_PRECONDITION when the volume is not published to that node; NOT_FOUND for a volume
// this controller does not hold.
Expected<StringMap> publish_secrets_here(const ServiceContext& context, std::string_view volume_id,
                                         std::string_view node_id);

// NodeStage's side: this node's secrets of `volume_id`, from the controller (the plugin's
// controller channel) or, where this process is the controller, from its own store; none
// where there is no controller to ask (the request's own secrets are then all there are).
Expected<StringMap> fetch_publish_secrets(const ServiceContext& context,
                                          std::string_view volume_id);

}  // namespace rosetctl
