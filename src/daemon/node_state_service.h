// rosetctl.v1.NodeState: what this node knows of the volumes on it beyond CSI's Node service
// (stagings, publications and their mounts' condition, connect's paths), and the attach lock
// that lets one `volume connect` or `disconnect` at a time work on a volume here. Served beside
// the Node service, so the CLI asks the node instead of reading its state directory, locally
// and (through the controller's proxy) on another node alike. Like the Node service it answers
// only for this host; a serve registers it behind the cluster's routing.
#pragma once

#include "daemon/handler_pool.h"
#include "daemon/service_context.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

// Where `volume connect` puts a block volume's device file by default, as udev puts disks
// under /dev/disk.
inline constexpr const char* kBlockDeviceDir = "/dev/rosetctl";

// How long HoldAttachLock waits for another holder of the lock.
inline constexpr std::chrono::seconds kAttachPatience{60};

class NodeStateService : public v1::NodeState::CallbackService {
 public:
  NodeStateService(ServiceContext& context, HandlerPool& handlers)
      : context_(context), handlers_(handlers) {}

  using Request = grpc::CallbackServerContext;
  grpc::ServerUnaryReactor* GetNodeVolumes(Request*, const v1::GetNodeVolumesRequest*,
                                           v1::GetNodeVolumesResponse*) override;
  grpc::ServerUnaryReactor* ResolveTarget(Request*, const v1::ResolveTargetRequest*,
                                          v1::ResolveTargetResponse*) override;
  grpc::ServerWriteReactor<v1::HoldAttachLockResponse>* HoldAttachLock(
      Request*, const v1::HoldAttachLockRequest*) override;

 private:
  Status get_node_volumes(const v1::GetNodeVolumesRequest& request,
                          v1::GetNodeVolumesResponse* response);
  Status describe(const std::string& volume_id, v1::NodeVolume* out);
  Status resolve_target(const v1::ResolveTargetRequest& request,
                        v1::ResolveTargetResponse* response);

  ServiceContext& context_;
  HandlerPool& handlers_;
};

// OK when `node_id` is this node's: a request meant for another node (misrouted, or a
// controller with a Node service of its own asked for a proxied node) is refused, never
// answered with this node's facts.
Status check_this_node(const ServiceContext& context, std::string_view node_id);

}  // namespace rosetctl
