// The Catalog's gRPC entry points (routing_catalog.h): each answers on the handler pool, by the
// combined view (catalog_everywhere.cc) or this host's answers (daemon/host_catalog.h).
#include "cluster/routing_catalog.h"

#include "daemon/call_log.h"
#include "daemon/publish_secrets.h"

namespace rosetctl {

grpc::ServerUnaryReactor* RoutingCatalog::FindVolume(Request* call,
                                                     const v1::FindVolumeRequest* request,
                                                     v1::FindVolumeResponse* response) {
  return answer(handlers_, call, "FindVolume", request, response,
                [=, this] { return find_volume(*call, *request, response); });
}

grpc::ServerUnaryReactor* RoutingCatalog::GetPublishSecrets(
    Request* call, const v1::GetPublishSecretsRequest* request,
    v1::GetPublishSecretsResponse* response) {
  return answer(handlers_, call, "GetPublishSecrets", request, response, [=, this] {
    auto secrets = publish_secrets_here(context_, request->volume_id(), request->node_id());
    if (!secrets) return secrets.status();
    response->mutable_secrets()->insert(secrets->begin(), secrets->end());
    return Status::ok();
  });
}

grpc::ServerUnaryReactor* RoutingCatalog::SetVolumeMove(Request* call,
                                                        const v1::SetVolumeMoveRequest* request,
                                                        v1::SetVolumeMoveResponse* response) {
  return answer(handlers_, call, "SetVolumeMove", request, response,
                [=, this] { return set_volume_move(*call, *request, response); });
}

grpc::ServerUnaryReactor* RoutingCatalog::GetVolumeDetails(
    Request* call, const v1::GetVolumeDetailsRequest* request,
    v1::GetVolumeDetailsResponse* response) {
  return answer(handlers_, call, "GetVolumeDetails", request, response,
                [=, this] { return volume_details(*request, response); });
}

grpc::ServerUnaryReactor* RoutingCatalog::FindSnapshot(Request* call,
                                                       const v1::FindSnapshotRequest* request,
                                                       v1::FindSnapshotResponse* response) {
  return answer(handlers_, call, "FindSnapshot", request, response, [=, this] {
    auto located = locate_snapshot(*call, request->reference());
    if (!located) return located.status();
    *response->mutable_snapshot() = std::move(located->details);
    return Status::ok();
  });
}

grpc::ServerUnaryReactor* RoutingCatalog::ListSnapshotDetails(
    Request* call, const v1::ListSnapshotDetailsRequest* request,
    v1::ListSnapshotDetailsResponse* response) {
  return answer(handlers_, call, "ListSnapshotDetails", request, response,
                [=, this] { return list_snapshots(*call, *request, response); });
}

grpc::ServerUnaryReactor* RoutingCatalog::DiffSnapshots(Request* call,
                                                        const v1::DiffSnapshotsRequest* request,
                                                        v1::DiffSnapshotsResponse* response) {
  return answer(handlers_, call, "DiffSnapshots", request, response,
                [=, this] { return diff(*call, *request, response); });
}

grpc::ServerUnaryReactor* RoutingCatalog::VerifySnapshots(Request* call,
                                                          const v1::VerifySnapshotsRequest* request,
                                                          v1::VerifySnapshotsResponse* response) {
  return answer(handlers_, call, "VerifySnapshots", request, response,
                [=, this] { return verify(*call, *request, response); });
}

grpc::ServerUnaryReactor* RoutingCatalog::CollectGarbage(Request* call,
                                                         const v1::CollectGarbageRequest* request,
                                                         v1::CollectGarbageResponse* response) {
  return answer(handlers_, call, "CollectGarbage", request, response,
                [=, this] { return host_.collect(*request, response); });
}

}  // namespace rosetctl
