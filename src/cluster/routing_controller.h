// The CSI Controller service as gRPC serves it: it decides *where* each call is answered (this
// host, or the node a placed id or a topology names: cluster/routing.h) and delegates. This
// host's answers are daemon/controller_service.h's, which knows no other host; another node's
// are that node's, asked over mutual TLS with this host's certificate
// (cluster/node_controllers.h). A node serves this too, for its controller: the ids it gets are
// its own (cluster/placed_interceptor.h), so its calls stay on it.
//
// What only routing does: placement of node-local volumes (placement.cc), clones across nodes
// (cross_node_clone.cc, with their leftovers, cluster/clone_leftovers.h), GetCapacity of
// another node, and ListVolumes/ListSnapshots over this host and every registered node.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cluster/clone_leftovers.h"
#include "cluster/cluster_context.h"
#include "cluster/node_controllers.h"
#include "cluster/placed_id.h"
#include "cluster/routing.h"
#include "csi.grpc.pb.h"
#include "daemon/background_work.h"
#include "daemon/call_log.h"
#include "daemon/controller_service.h"
#include "daemon/handler_pool.h"

namespace rosetctl {

class RoutingController final : public csi::v1::Controller::CallbackService {
 public:
  RoutingController(ClusterContext& context, HandlerPool& handlers, NodeControllers& nodes,
                    ControllerService& here)
      : context_(context),
        handlers_(handlers),
        nodes_(nodes),
        here_(here),
        clone_intents_(context.layout.root + "/clones") {}

  // Removes, in the background, the snapshots of clones across nodes that a killed controller
  // left behind (cluster/clone_leftovers.h). For serve, once it can reach its nodes.
  void collect_clone_leftovers_later();

  using Request = grpc::CallbackServerContext;
  grpc::ServerUnaryReactor* CreateVolume(Request*, const csi::v1::CreateVolumeRequest*,
                                         csi::v1::CreateVolumeResponse*) override;
  grpc::ServerUnaryReactor* DeleteVolume(Request*, const csi::v1::DeleteVolumeRequest*,
                                         csi::v1::DeleteVolumeResponse*) override;
  grpc::ServerUnaryReactor* ControllerPublishVolume(
      Request*, const csi::v1::ControllerPublishVolumeRequest*,
      csi::v1::ControllerPublishVolumeResponse*) override;
  grpc::ServerUnaryReactor* ControllerUnpublishVolume(
      Request*, const csi::v1::ControllerUnpublishVolumeRequest*,
      csi::v1::ControllerUnpublishVolumeResponse*) override;
  grpc::ServerUnaryReactor* ValidateVolumeCapabilities(
      Request*, const csi::v1::ValidateVolumeCapabilitiesRequest*,
      csi::v1::ValidateVolumeCapabilitiesResponse*) override;
  grpc::ServerUnaryReactor* ListVolumes(Request*, const csi::v1::ListVolumesRequest*,
                                        csi::v1::ListVolumesResponse*) override;
  grpc::ServerUnaryReactor* GetCapacity(Request*, const csi::v1::GetCapacityRequest*,
                                        csi::v1::GetCapacityResponse*) override;
  grpc::ServerUnaryReactor* ControllerGetCapabilities(
      Request*, const csi::v1::ControllerGetCapabilitiesRequest*,
      csi::v1::ControllerGetCapabilitiesResponse*) override;
  grpc::ServerUnaryReactor* ControllerGetVolume(Request*,
                                                const csi::v1::ControllerGetVolumeRequest*,
                                                csi::v1::ControllerGetVolumeResponse*) override;
  grpc::ServerUnaryReactor* ControllerExpandVolume(
      Request*, const csi::v1::ControllerExpandVolumeRequest*,
      csi::v1::ControllerExpandVolumeResponse*) override;
  grpc::ServerUnaryReactor* CreateSnapshot(Request*, const csi::v1::CreateSnapshotRequest*,
                                           csi::v1::CreateSnapshotResponse*) override;
  grpc::ServerUnaryReactor* DeleteSnapshot(Request*, const csi::v1::DeleteSnapshotRequest*,
                                           csi::v1::DeleteSnapshotResponse*) override;
  grpc::ServerUnaryReactor* ListSnapshots(Request*, const csi::v1::ListSnapshotsRequest*,
                                          csi::v1::ListSnapshotsResponse*) override;
  grpc::ServerUnaryReactor* ControllerModifyVolume(
      Request*, const csi::v1::ControllerModifyVolumeRequest*,
      csi::v1::ControllerModifyVolumeResponse*) override;

 private:
  // CreateVolume: on the node its placement names, as a clone across nodes, or here.
  Status create_volume(const csi::v1::CreateVolumeRequest& request,
                       csi::v1::CreateVolumeResponse* response, const std::string& clone_by);
  Status get_capacity(const csi::v1::GetCapacityRequest& request,
                      csi::v1::GetCapacityResponse* response);

  // cordon_placement.cc: the node a CreateVolume placed on `first` goes to, past cordoned ones
  // (nullopt: here); RESOURCE_EXHAUSTED when every node it may go to is cordoned.
  Expected<std::optional<std::string>> uncordoned_placement(
      const std::string& first, const csi::v1::CreateVolumeRequest& request);
  Expected<bool> is_cordoned(const std::string& node);
  bool holds_volume_named(const std::string& node, const std::string& name);

  // placement.cc: volumes on other nodes (cluster/placed_id.h).
  Status create_on_node(const std::string& node, const csi::v1::CreateVolumeRequest& request,
                        csi::v1::CreateVolumeResponse* response);
  // The metadata that lets `receiver` read `snapshot` on the node holding it
  // (cluster/transfer_grants.h): a new grant, none when the snapshot is the receiver's own.
  std::map<std::string, std::string> grant_transfer(const std::string& receiver,
                                                    const PlacedId& snapshot);
  // grant_transfer() of a create on `node` from a snapshot another node holds; none otherwise.
  std::map<std::string, std::string> transfer_to(const std::string& node,
                                                 const csi::v1::CreateVolumeRequest& request);
  Status capacity_on_node(const std::string& node, const csi::v1::GetCapacityRequest& request,
                          csi::v1::GetCapacityResponse* response);
  Status list_volumes_everywhere(grpc::CallbackServerContext& call,
                                 const csi::v1::ListVolumesRequest& request,
                                 csi::v1::ListVolumesResponse* response);
  Status list_snapshots_everywhere(grpc::CallbackServerContext& call,
                                   const csi::v1::ListSnapshotsRequest& request,
                                   csi::v1::ListSnapshotsResponse* response);
  template <typename Req, typename Resp, typename Local>
  Status list_everywhere(grpc::CallbackServerContext& call, const Req& request, Resp* response,
                         NodeControllers::Rpc<Req, Resp> rpc, Local local);
  static Status partial_list(grpc::CallbackServerContext& call,
                             const std::vector<std::string>& unreachable);

  // cross_node_clone.cc: a clone of a volume on another node than the one it is to be made on.
  // `checked`: the request's checks here (ControllerService::create_checks), for a clone made
  // here; null: the request is checked here when it is made here.
  Status clone_on_node(const std::string& node, const PlacedId& source,
                       const csi::v1::CreateVolumeRequest& request, const CreateChecks* checked,
                       csi::v1::CreateVolumeResponse* response);
  Expected<std::string> snapshot_for_clone(const PlacedId& source, const std::string& node,
                                           const csi::v1::CreateVolumeRequest& request);
  // Whether the snapshot is gone from both nodes (each failure is logged).
  bool remove_clone_snapshot(const PlacedId& snapshot, const std::string& node);
  void collect_clone_leftovers();
  // The snapshot a controller named for a clone across nodes; "" from anyone else.
  static std::string clone_by_snapshot(const grpc::CallbackServerContext& call);

  // `local()` when `id` is this host's, else the same call on the node its placed id names
  // (`unregistered`: the code when that node is not registered).
  template <typename Req, typename Resp, typename Local>
  Status here_or_on_node(const std::string& id, NodeControllers::Rpc<Req, Resp> rpc,
                         const Req& request, Resp* response, Code unregistered, Local local) {
    auto node = node_of_id(id, context_.options.node_id);
    if (!node) return local();
    return nodes_.call(*node, rpc, request, response, unregistered);
  }

  template <typename Handler>
  grpc::ServerUnaryReactor* serve(Request* call, std::string_view method,
                                  const google::protobuf::Message* request,
                                  google::protobuf::Message* response, Handler handler) {
    // Who may call is cluster/authorization_table.h's: on a node, only its controller.
    return answer(handlers_, call, method, request, response, std::move(handler));
  }

  ClusterContext& context_;
  HandlerPool& handlers_;
  NodeControllers& nodes_;
  ControllerService& here_;     // this host's answers
  CloneIntents clone_intents_;  // clones across nodes in flight (cross_node_clone.cc)
  BackgroundWork background_;   // last: destroyed (joined) first, while the context still lives
};

}  // namespace rosetctl
