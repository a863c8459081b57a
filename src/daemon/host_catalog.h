// rosetctl.v1.Catalog's answers from this host's own store and providers: volumes by name,
// snapshot details, the snapshot store's maintenance. The gRPC service a serve registers is the
// cluster's (cluster/routing_catalog.h): it sends a lookup to the host a placed id names, or asks
// every host for a name, and takes this host's answers from here. The CLI calls it the same way
// in its own process and across hosts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/service_context.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

class HostCatalog {
 public:
  explicit HostCatalog(ServiceContext& context) : context_(context) {}

  Status find_volume_here(const std::string& name_or_id, v1::FindVolumeResponse* response);
  Status volume_details_here(const v1::GetVolumeDetailsRequest& request,
                             v1::GetVolumeDetailsResponse* response);
  Status list_snapshots_here(const v1::ListSnapshotDetailsRequest& request,
                             std::vector<v1::SnapshotDetails>* out);
  Status diff_here(const std::string& from, const std::string& to,
                   v1::DiffSnapshotsResponse* response);
  Status verify_here(const v1::VerifySnapshotsRequest& request,
                     v1::VerifySnapshotsResponse* response);
  Status collect(const v1::CollectGarbageRequest& request, v1::CollectGarbageResponse* response);

 private:
  ServiceContext& context_;
};

}  // namespace rosetctl
