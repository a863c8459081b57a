// CSI Controller: volume lifecycle, publication to nodes, listing, capacity and snapshots.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/clone_leftovers.h"
#include "cluster/node_controllers.h"
#include "cluster/placed_id.h"
#include "csi.grpc.pb.h"
#include "daemon/background_work.h"
#include "daemon/call_log.h"
#include "daemon/handler_pool.h"
#include "daemon/service_context.h"
#include "daemon/volume_lookup.h"

namespace rosetctl {

class ControllerService final : public csi::v1::Controller::CallbackService {
 public:
  ControllerService(ServiceContext& context, HandlerPool& handlers, NodeControllers& nodes)
      : context_(context),
        handlers_(handlers),
        nodes_(nodes),
        clone_intents_(context.layout.root + "/clones") {}

  // Removes, in the background, the snapshots of clones across nodes that a killed controller
  // left behind (daemon/clone_leftovers.h). For serve, once it can reach its nodes.
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
  // `clone_by`: the snapshot a clone of another node's volume is made by (kCloneBySnapshotKey).
  // The provider a CreateVolume names, else its content source's, else the default one.
  Expected<Provider*> create_provider(const StringMap& parameters,
                                      const csi::v1::CreateVolumeRequest& request);
  Status create_volume(const csi::v1::CreateVolumeRequest& request,
                       csi::v1::CreateVolumeResponse* response, const std::string& clone_by = {});
  Status delete_volume(const csi::v1::DeleteVolumeRequest& request);
  Status publish_volume(const csi::v1::ControllerPublishVolumeRequest& request,
                        csi::v1::ControllerPublishVolumeResponse* response);
  Status unpublish_volume(const csi::v1::ControllerUnpublishVolumeRequest& request);
  Status validate_capabilities(const csi::v1::ValidateVolumeCapabilitiesRequest& request,
                               csi::v1::ValidateVolumeCapabilitiesResponse* response);
  Status list_volumes(const csi::v1::ListVolumesRequest& request,
                      csi::v1::ListVolumesResponse* response);
  Status get_capacity(const csi::v1::GetCapacityRequest& request,
                      csi::v1::GetCapacityResponse* response);
  Status get_volume(const csi::v1::ControllerGetVolumeRequest& request,
                    csi::v1::ControllerGetVolumeResponse* response);
  Status expand_volume(const csi::v1::ControllerExpandVolumeRequest& request,
                       csi::v1::ControllerExpandVolumeResponse* response);
  // controller_modify.cc
  Status modify_volume(const csi::v1::ControllerModifyVolumeRequest& request);
  // controller_snapshots.cc
  Status create_snapshot(const csi::v1::CreateSnapshotRequest& request,
                         csi::v1::CreateSnapshotResponse* response);
  Status delete_snapshot(const csi::v1::DeleteSnapshotRequest& request);
  Status list_snapshots(const csi::v1::ListSnapshotsRequest& request,
                        csi::v1::ListSnapshotsResponse* response);
  // Runs in the background: the provider takes the snapshot, the record says how it went.
  // `secrets` stay in memory: records never hold them.
  void take_snapshot(SnapshotRecord record, SnapshotSide* snapshots, std::vector<HeldLock> locks,
                     const StringMap& secrets);
  Expected<std::optional<SnapshotRecord>> settle_abandoned(SnapshotRecord record);
  // For providers copying a volume's data: its stage lock, waited for a while.
  StagingLocker staging_locker() const;
  // The provider lets the request's node reach the volume (ControllerSide::map_to_node).
  Expected<StringMap> map_to_node(const LoadedVolume& volume,
                                  const csi::v1::ControllerPublishVolumeRequest& request);

  // placement.cc: volumes on other nodes (daemon/placed_id.h).
  // The node a CreateVolume of a node-local volume goes to; nullopt: this host.
  std::optional<std::string> placement_of(const csi::v1::CreateVolumeRequest& request) const;
  Status create_on_node(const std::string& node, const csi::v1::CreateVolumeRequest& request,
                        csi::v1::CreateVolumeResponse* response);
  // The metadata that lets `receiver` read `snapshot` on the node holding it
  // (daemon/transfer_grants.h): a new grant, none when the snapshot is the receiver's own.
  std::map<std::string, std::string> grant_transfer(const std::string& receiver,
                                                    const PlacedId& snapshot);
  // grant_transfer() of a create on `node` from a snapshot another node holds; none otherwise.
  std::map<std::string, std::string> transfer_to(const std::string& node,
                                                 const csi::v1::CreateVolumeRequest& request);
  // cross_node_clone.cc: a clone of a volume on another node than the one it is to be made on.
  Status clone_on_node(const std::string& node, const PlacedId& source,
                       const csi::v1::CreateVolumeRequest& request,
                       csi::v1::CreateVolumeResponse* response);
  Expected<std::string> snapshot_for_clone(const PlacedId& source, const std::string& node,
                                           const csi::v1::CreateVolumeRequest& request);
  // Whether the snapshot is gone from both nodes (each failure is logged).
  bool remove_clone_snapshot(const PlacedId& snapshot, const std::string& node);
  void collect_clone_leftovers();
  // The snapshot a controller named for a clone across nodes; "" from anyone else.
  static std::string clone_by_snapshot(const grpc::CallbackServerContext& call);
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

  // `local()` when `id` is this host's, else the same call on the node its placed id names
  // (`unregistered`: the code when that node is not registered).
  template <typename Req, typename Resp, typename Local>
  Status here_or_on_node(const std::string& id, NodeControllers::Rpc<Req, Resp> rpc,
                         const Req& request, Resp* response, Code unregistered, Local local) {
    auto placed = decode_placed_id(id);
    if (!placed || placed->node == context_.options.node_id) return local();
    return nodes_.call(placed->node, rpc, request, response, unregistered);
  }

  template <typename Handler>
  grpc::ServerUnaryReactor* serve(Request* call, std::string_view method,
                                  const google::protobuf::Message* request,
                                  google::protobuf::Message* response, Handler handler) {
    // Who may call is daemon/authorization_table.h's: on a node, only its controller.
    return answer(handlers_, call, method, request, response, std::move(handler));
  }

  ServiceContext& context_;
  HandlerPool& handlers_;
  NodeControllers& nodes_;
  CloneIntents clone_intents_;  // clones across nodes in flight (cross_node_clone.cc)
  BackgroundWork background_;   // last: destroyed (joined) first, while the context still lives
};

}  // namespace rosetctl
