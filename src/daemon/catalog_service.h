// rosetctl.v1.Catalog: what the CLI asks a controller beside CSI (volumes by name, snapshot
// details, the snapshot store's maintenance), answered from the controller's store and
// providers. The CLI calls it the same way in its own process and across hosts.
#pragma once

#include "daemon/handler_pool.h"
#include "daemon/service_context.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

class CatalogService final : public v1::Catalog::CallbackService {
 public:
  CatalogService(ServiceContext& context, HandlerPool& handlers)
      : context_(context), handlers_(handlers) {}

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

 private:
  Status find_volume(const v1::FindVolumeRequest& request, v1::FindVolumeResponse* response);
  Status volume_details(const v1::GetVolumeDetailsRequest& request,
                        v1::GetVolumeDetailsResponse* response);
  Status list_snapshots(const v1::ListSnapshotDetailsRequest& request,
                        v1::ListSnapshotDetailsResponse* response);
  Status diff(const v1::DiffSnapshotsRequest& request, v1::DiffSnapshotsResponse* response);
  Status verify(const v1::VerifySnapshotsRequest& request, v1::VerifySnapshotsResponse* response);
  Status collect(const v1::CollectGarbageRequest& request, v1::CollectGarbageResponse* response);

  ServiceContext& context_;
  HandlerPool& handlers_;
};

}  // namespace rosetctl
