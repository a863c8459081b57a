// Placement past cordoned nodes (`rosetctl node cordon`): a CreateVolume placed on a node that
// is cordoned goes to the next node its topology allows that is not, and fails
// RESOURCE_EXHAUSTED when none is (CSI: the topology asked for cannot be met).
#include <optional>
#include <string>

#include "cluster/routing.h"
#include "cluster/routing_controller.h"
#include "core/log.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

// Whether `node` holds a volume named `name` already: a CreateVolume repeated after its node
// was cordoned (its first answer lost) is answered by that volume, not made again elsewhere. A
// node that does not answer is taken to hold none: a cordoned node is often one switched off
// for its maintenance, and it must not stop creates that may go elsewhere.
bool RoutingController::holds_volume_named(const std::string& node, const std::string& name) {
  v1::FindVolumeRequest request;
  request.set_name_or_id(name);
  v1::FindVolumeResponse response;
  Status found = nodes_.call(node, &v1::Catalog::Stub::FindVolume, request, &response,
                             Code::kNotFound, NodeControllers::kListPatience);
  if (!found && found.code() != Code::kNotFound) {
    spdlog::warn(
        "placing volume \"{}\": cordoned node \"{}\" did not say whether it holds it "
        "({}); taken to hold none",
        name, node, found.message());
  }
  return found.is_ok();
}

Expected<bool> RoutingController::is_cordoned(const std::string& node) {
  auto record = context_.store.find_node(node);
  if (!record) return record.status();
  return record->has_value() && (*record)->cordoned_at_ns != 0;
}

Expected<std::optional<std::string>> RoutingController::uncordoned_placement(
    const std::string& first, const csi::v1::CreateVolumeRequest& request) {
  auto cordoned = is_cordoned(first);
  if (!cordoned) return cordoned.status();
  if (!*cordoned || holds_volume_named(first, request.name())) {
    return std::optional<std::string>(first);
  }
  const std::string& own = context_.options.node_id;
  for (const std::string& node : requested_nodes(request.accessibility_requirements())) {
    if (node == first) continue;
    // The controller's own node is never registered, so never cordoned: nullopt places here.
    if (node == own) return std::optional<std::string>();
    auto other = is_cordoned(node);
    if (!other) return other.status();
    if (!*other) return std::optional<std::string>(node);
  }
  return cordoned_error(first);
}

}  // namespace rosetctl
