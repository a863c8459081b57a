// Placement of node-local volumes and the controller's combined list (docs/guides/across-hosts.md,
// "Volumes on many nodes"): a CreateVolume made on the node it is placed on (which node is
// cluster/routing.h's), GetCapacity per node, and ListVolumes/ListSnapshots over this host and
// every registered node.
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "cluster/peer_authority.h"
#include "cluster/routing_controller.h"
#include "core/validate.h"
#include "daemon/convert.h"

namespace rosetctl {

std::map<std::string, std::string> RoutingController::grant_transfer(const std::string& receiver,
                                                                     const PlacedId& snapshot) {
  if (snapshot.node == receiver) return {};
  return {{kTransferGrantKey,
           context_.transfer_grants.issue({receiver, snapshot.node, snapshot.local_id})}};
}

// A create from a snapshot another node holds (the controller host included) is a transfer
// this controller starts: the receiver gets a grant to read that snapshot there.
std::map<std::string, std::string> RoutingController::transfer_to(
    const std::string& node, const csi::v1::CreateVolumeRequest& request) {
  const auto& source = request.volume_content_source();
  if (!source.has_snapshot()) return {};
  auto held = decode_placed_id(source.snapshot().snapshot_id());
  if (!held) return {};
  return grant_transfer(node, *held);
}

Status RoutingController::create_on_node(const std::string& node,
                                         const csi::v1::CreateVolumeRequest& request,
                                         csi::v1::CreateVolumeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(request.name(), "name"));
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(node, fmt::format("topology {}", kTopologyNodeKey)));
  // CSI: RESOURCE_EXHAUSTED when the volume cannot be provisioned in the requested topology; a
  // node this controller does not know is such a place.
  // A restore or clone copies data, on that node, and fetches a snapshot held by yet another
  // node first (daemon/content_source.cc): it takes as long as its caller waits.
  csi::v1::CreateVolumeRequest forwarded = request;
  auto given = place_own_source(context_.options.node_id, forwarded);
  if (!given) return given.status();
  const auto& source = forwarded.volume_content_source();
  auto volume_elsewhere =
      source.has_volume() ? decode_placed_id(source.volume().volume_id()) : std::nullopt;
  if (volume_elsewhere && volume_elsewhere->node != node) {
    ROSETCTL_RETURN_IF_ERROR(clone_on_node(node, *volume_elsewhere, forwarded, nullptr, response));
  } else {
    ROSETCTL_RETURN_IF_ERROR(nodes_.call(node, &csi::v1::Controller::Stub::CreateVolume, forwarded,
                                         response, Code::kResourceExhausted,
                                         request.has_volume_content_source()
                                             ? NodeControllers::kDataPatience
                                             : NodeControllers::kDefaultPatience,
                                         transfer_to(node, forwarded)));
  }
  // The volume names its source as the caller did.
  if (!given->empty()) {
    auto* made = response->mutable_volume()->mutable_content_source();
    if (made->has_snapshot()) made->mutable_snapshot()->set_snapshot_id(*given);
    if (made->has_volume()) made->mutable_volume()->set_volume_id(*given);
  }
  return Status::ok();
}

Status RoutingController::capacity_on_node(const std::string& node,
                                           const csi::v1::GetCapacityRequest& request,
                                           csi::v1::GetCapacityResponse* response) {
  auto registered = context_.store.find_node(node);
  if (!registered) return registered.status();
  // Nothing can be provisioned on a node that is not registered: 0, as for any segment we
  // cannot serve.
  if (!registered->has_value()) {
    response->set_available_capacity(0);
    return Status::ok();
  }
  return nodes_.call(node, &csi::v1::Controller::Stub::GetCapacity, request, response,
                     Code::kNotFound, NodeControllers::kListPatience);
}

// ---------------------------------------------------------------- the combined list

template <typename Req, typename Resp, typename Local>
Status RoutingController::list_everywhere(grpc::CallbackServerContext& call, const Req& request,
                                          Resp* response, NodeControllers::Rpc<Req, Resp> rpc,
                                          Local local) {
  if (request.max_entries() < 0) {
    return error(Code::kInvalidArgument, "max_entries must not be negative");
  }
  const std::string& own = context_.options.node_id;
  auto others = nodes_.other_nodes();
  if (!others) return others.status();
  // A node's certificate lists the controller host's and its own, never another node's
  // (docs/SECURITY.md; a starting token naming another node was refused before we ran).
  if (Peer peer = peer_of(call); peer.role == PeerRole::kNode) {
    std::erase_if(*others, [&peer](const std::string& node) { return node != peer.name; });
  }
  // This host first, then the registered nodes by id.
  std::vector<std::string> order{own};
  order.insert(order.end(), others->begin(), others->end());

  // A token that does not decode is this host's own (what ListVolumes issued before placement):
  // its handler judges it, ABORTED when it is none of ours.
  ListPosition position{own, request.starting_token()};
  if (auto decoded = decode_list_token(request.starting_token())) position = std::move(*decoded);
  size_t start = 0;
  if (position.node != own) {
    start = std::lower_bound(order.begin() + 1, order.end(), position.node) - order.begin();
    if (start == order.size() || order[start] != position.node) position.token.clear();
  }

  int remaining = request.max_entries();  // 0: no limit
  std::vector<std::string> unreachable;
  for (size_t i = start; i < order.size(); ++i) {
    Req page = request;
    page.set_starting_token(i == start ? position.token : "");
    page.set_max_entries(remaining);
    Resp part;
    Status status = order[i] == own ? local(page, &part)
                                    : nodes_.call(order[i], rpc, page, &part, Code::kUnavailable,
                                                  NodeControllers::kListPatience);
    if (!status) {
      if (order[i] == own || status.code() != Code::kUnavailable) return status;
      unreachable.push_back(status.message());
      continue;
    }
    for (auto& entry : *part.mutable_entries())
      *response->add_entries() = std::move(entry);
    if (!part.next_token().empty()) {
      response->set_next_token(encode_list_token({order[i], part.next_token()}));
      break;
    }
    if (request.max_entries() > 0) {
      remaining -= part.entries_size();
      if (remaining <= 0) {
        if (i + 1 < order.size()) response->set_next_token(encode_list_token({order[i + 1], ""}));
        break;
      }
    }
  }
  return partial_list(call, unreachable);
}

// CSI's list responses have no field for "this list is short": a CSI caller (the external
// health monitor, a CO's reconciler) that got a partial list would take the volumes of a node
// that did not answer for gone. So the call fails UNAVAILABLE naming the nodes, unless the
// caller said it understands partial lists (our CLI, with the `rosetctl-partial-list` metadata):
// then it gets what answered and the nodes that did not in `rosetctl-unreachable-nodes`.
Status RoutingController::partial_list(grpc::CallbackServerContext& call,
                                       const std::vector<std::string>& unreachable) {
  if (unreachable.empty()) return Status::ok();
  const auto& metadata = call.client_metadata();
  if (metadata.find(kPartialListKey) == metadata.end()) {
    return error(Code::kUnavailable, "{} (the list would be incomplete)",
                 fmt::join(unreachable, "; "));
  }
  for (std::string why : unreachable) {
    // A metadata value is printable ASCII; the reason is shown as the caller reads it.
    for (char& c : why) {
      if (c < 0x20 || c > 0x7e) c = '?';
    }
    call.AddTrailingMetadata(kUnreachableNodesKey, why);
  }
  return Status::ok();
}

Status RoutingController::list_volumes_everywhere(grpc::CallbackServerContext& call,
                                                  const csi::v1::ListVolumesRequest& request,
                                                  csi::v1::ListVolumesResponse* response) {
  return list_everywhere(
      call, request, response, &csi::v1::Controller::Stub::ListVolumes,
      [this](const auto& page, auto* part) { return here_.list_volumes(page, part); });
}

Status RoutingController::list_snapshots_everywhere(grpc::CallbackServerContext& call,
                                                    const csi::v1::ListSnapshotsRequest& request,
                                                    csi::v1::ListSnapshotsResponse* response) {
  // A snapshot or a source volume named: the one node that holds it answers.
  const std::string& named =
      request.snapshot_id().empty() ? request.source_volume_id() : request.snapshot_id();
  if (!named.empty()) {
    auto node = node_of_id(named, context_.options.node_id);
    if (!node) return here_.list_snapshots(request, response);
    return nodes_.call(*node, &csi::v1::Controller::Stub::ListSnapshots, request, response,
                       Code::kUnavailable);
  }
  return list_everywhere(
      call, request, response, &csi::v1::Controller::Stub::ListSnapshots,
      [this](const auto& page, auto* part) { return here_.list_snapshots(page, part); });
}

}  // namespace rosetctl
