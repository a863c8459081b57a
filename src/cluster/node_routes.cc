// Forwarding in front of this host's Node and NodeState services (node_routes.h).
#include "cluster/node_routes.h"

#include "cluster/node_forward.h"

namespace rosetctl {
namespace {

constexpr std::string_view kNodeService = "csi.v1.Node";
constexpr std::string_view kNodeStateService = "rosetctl.v1.NodeState";

}  // namespace

grpc::ServerUnaryReactor* RoutedNode::NodeStageVolume(
    Request* call, const csi::v1::NodeStageVolumeRequest* request,
    csi::v1::NodeStageVolumeResponse* response) {
  return forward_or(cluster_, call, kNodeService, "NodeStageVolume", *request, response,
                    [&] { return NodeService::NodeStageVolume(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNode::NodeUnstageVolume(
    Request* call, const csi::v1::NodeUnstageVolumeRequest* request,
    csi::v1::NodeUnstageVolumeResponse* response) {
  return forward_or(cluster_, call, kNodeService, "NodeUnstageVolume", *request, response,
                    [&] { return NodeService::NodeUnstageVolume(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNode::NodePublishVolume(
    Request* call, const csi::v1::NodePublishVolumeRequest* request,
    csi::v1::NodePublishVolumeResponse* response) {
  return forward_or(cluster_, call, kNodeService, "NodePublishVolume", *request, response,
                    [&] { return NodeService::NodePublishVolume(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNode::NodeUnpublishVolume(
    Request* call, const csi::v1::NodeUnpublishVolumeRequest* request,
    csi::v1::NodeUnpublishVolumeResponse* response) {
  return forward_or(cluster_, call, kNodeService, "NodeUnpublishVolume", *request, response,
                    [&] { return NodeService::NodeUnpublishVolume(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNode::NodeGetVolumeStats(
    Request* call, const csi::v1::NodeGetVolumeStatsRequest* request,
    csi::v1::NodeGetVolumeStatsResponse* response) {
  return forward_or(cluster_, call, kNodeService, "NodeGetVolumeStats", *request, response,
                    [&] { return NodeService::NodeGetVolumeStats(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNode::NodeExpandVolume(
    Request* call, const csi::v1::NodeExpandVolumeRequest* request,
    csi::v1::NodeExpandVolumeResponse* response) {
  return forward_or(cluster_, call, kNodeService, "NodeExpandVolume", *request, response,
                    [&] { return NodeService::NodeExpandVolume(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNode::NodeGetCapabilities(
    Request* call, const csi::v1::NodeGetCapabilitiesRequest* request,
    csi::v1::NodeGetCapabilitiesResponse* response) {
  return forward_or(cluster_, call, kNodeService, "NodeGetCapabilities", *request, response,
                    [&] { return NodeService::NodeGetCapabilities(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNode::NodeGetInfo(Request* call,
                                                  const csi::v1::NodeGetInfoRequest* request,
                                                  csi::v1::NodeGetInfoResponse* response) {
  return forward_or(cluster_, call, kNodeService, "NodeGetInfo", *request, response,
                    [&] { return NodeService::NodeGetInfo(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNodeState::GetNodeVolumes(Request* call,
                                                          const v1::GetNodeVolumesRequest* request,
                                                          v1::GetNodeVolumesResponse* response) {
  return forward_or(cluster_, call, kNodeStateService, "GetNodeVolumes", *request, response,
                    [&] { return NodeStateService::GetNodeVolumes(call, request, response); });
}

grpc::ServerUnaryReactor* RoutedNodeState::ResolveTarget(Request* call,
                                                         const v1::ResolveTargetRequest* request,
                                                         v1::ResolveTargetResponse* response) {
  return forward_or(cluster_, call, kNodeStateService, "ResolveTarget", *request, response,
                    [&] { return NodeStateService::ResolveTarget(call, request, response); });
}

grpc::ServerWriteReactor<v1::HoldAttachLockResponse>* RoutedNodeState::HoldAttachLock(
    Request* call, const v1::HoldAttachLockRequest* request) {
  if (auto node = other_node_named(cluster_, *call)) {
    return new ForwardedStream<v1::HoldAttachLockResponse>(
        cluster_, call, fmt::format("/{}/HoldAttachLock", kNodeStateService), std::move(*node),
        *request);
  }
  return NodeStateService::HoldAttachLock(call, request);
}

}  // namespace rosetctl
