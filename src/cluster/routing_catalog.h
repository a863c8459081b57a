// rosetctl.v1.Catalog: what the CLI asks a controller beside CSI (volumes by name, snapshot
// details, the snapshot store's maintenance), answered from the controller's store and
// providers (daemon/host_catalog.h). The CLI calls it the same way in its own process and across
// hosts.
//
// Volumes and snapshots placed on nodes live in the nodes' stores: a lookup by placed id is the
// same Catalog call on the node its id names, sent the way CSI calls on placed ids are
// (node_controllers.h), and a lookup by name (or commit) asks this host and every node the
// caller may see (a node certificate: the controller host and itself), so a name unique in that
// view resolves wherever the user stands and an ambiguous one is refused naming each id.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cluster/node_controllers.h"
#include "daemon/handler_pool.h"
#include "daemon/host_catalog.h"
#include "daemon/service_context.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

class RoutingCatalog final : public v1::Catalog::CallbackService {
 public:
  RoutingCatalog(ServiceContext& context, HandlerPool& handlers, NodeControllers& nodes)
      : context_(context), handlers_(handlers), nodes_(nodes), host_(context) {}

  using Request = grpc::CallbackServerContext;
  grpc::ServerUnaryReactor* FindVolume(Request*, const v1::FindVolumeRequest*,
                                       v1::FindVolumeResponse*) override;
  grpc::ServerUnaryReactor* GetVolumeDetails(Request*, const v1::GetVolumeDetailsRequest*,
                                             v1::GetVolumeDetailsResponse*) override;
  grpc::ServerUnaryReactor* FindSnapshot(Request*, const v1::FindSnapshotRequest*,
                                         v1::FindSnapshotResponse*) override;
  grpc::ServerUnaryReactor* ListSnapshotDetails(Request*, const v1::ListSnapshotDetailsRequest*,
                                                v1::ListSnapshotDetailsResponse*) override;
  grpc::ServerUnaryReactor* DiffSnapshots(Request*, const v1::DiffSnapshotsRequest*,
                                          v1::DiffSnapshotsResponse*) override;
  grpc::ServerUnaryReactor* VerifySnapshots(Request*, const v1::VerifySnapshotsRequest*,
                                            v1::VerifySnapshotsResponse*) override;
  grpc::ServerUnaryReactor* CollectGarbage(Request*, const v1::CollectGarbageRequest*,
                                           v1::CollectGarbageResponse*) override;
  grpc::ServerUnaryReactor* GetPublishSecrets(Request*, const v1::GetPublishSecretsRequest*,
                                              v1::GetPublishSecretsResponse*) override;
  grpc::ServerUnaryReactor* SetVolumeMove(Request*, const v1::SetVolumeMoveRequest*,
                                          v1::SetVolumeMoveResponse*) override;
  grpc::ServerUnaryReactor* SetVolumeReplica(Request*, const v1::SetVolumeReplicaRequest*,
                                             v1::SetVolumeReplicaResponse*) override;

 private:
  // Where a reference the caller gave lives: `node` "" for this host, with the reference as
  // that host knows it (a placed id's local id).
  struct Where {
    std::string node;
    std::string reference;
  };
  // A snapshot found by reference, its details as the caller sees them (a placed id).
  struct Located {
    std::string node;      // "" for this host
    std::string local_id;  // its id where it lives
    v1::SnapshotDetails details;
  };

  // catalog_everywhere.cc: the combined view over this host and its nodes.
  Expected<Where> where_is(const grpc::CallbackServerContext& call, const std::string& reference);
  Expected<std::vector<std::string>> nodes_to_ask(const grpc::CallbackServerContext& call);
  Status find_volume(const grpc::CallbackServerContext& call, const v1::FindVolumeRequest& request,
                     v1::FindVolumeResponse* response);
  // A move's step on the host the volume's id names (daemon/volume_moves.h).
  Status set_volume_move(const grpc::CallbackServerContext& call,
                         const v1::SetVolumeMoveRequest& request,
                         v1::SetVolumeMoveResponse* response);
  // At a move's FINISH: the replica setting follows the volume to its new id (dropped, with a
  // warning, when the volume moved onto its replica's node).
  Status carry_replica(const std::string& old_id, const std::string& new_id,
                       const std::string& new_node);
  // replica_setting.cc: a replica set, removed or made due in this controller's store.
  Status set_volume_replica(const v1::SetVolumeReplicaRequest& request,
                            v1::SetVolumeReplicaResponse* response);
  // The replica this controller keeps of each volume answered (none on a node).
  Status add_replicas(v1::GetVolumeDetailsResponse* response);
  Expected<Located> locate_snapshot(const grpc::CallbackServerContext& call,
                                    const std::string& reference);
  Status volume_details(const v1::GetVolumeDetailsRequest& request,
                        v1::GetVolumeDetailsResponse* response);
  Status list_snapshots(const grpc::CallbackServerContext& call,
                        const v1::ListSnapshotDetailsRequest& request,
                        v1::ListSnapshotDetailsResponse* response);
  Status diff(const grpc::CallbackServerContext& call, const v1::DiffSnapshotsRequest& request,
              v1::DiffSnapshotsResponse* response);
  Status verify(const grpc::CallbackServerContext& call, const v1::VerifySnapshotsRequest& request,
                v1::VerifySnapshotsResponse* response);

  ServiceContext& context_;
  HandlerPool& handlers_;
  NodeControllers& nodes_;
  HostCatalog host_;  // this host's answers
};

}  // namespace rosetctl
