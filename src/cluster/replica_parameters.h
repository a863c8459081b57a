// CreateVolume parameters that give the new volume a replica (a StorageClass's, for Kubernetes):
// replicaToNode and replicaEvery, as `volume replicate --to-node --every` takes them. The routing
// controller takes them out before anything else sees the request (no provider knows them) and
// records the replica once the volume is made on its node (routing_controller.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "csi.pb.h"

namespace rosetctl {

inline constexpr const char* kReplicaToNodeParameter = "replicaToNode";
inline constexpr const char* kReplicaEveryParameter = "replicaEvery";

struct ReplicaAsked {
  std::string to_node;
  int64_t every_seconds = 0;
};

// Whether `request` names a replica at all (then it is to be taken out).
bool asks_for_replica(const csi::v1::CreateVolumeRequest& request);
// Takes both parameters out of `request`; INVALID_ARGUMENT naming the parameter when one comes
// without the other, or is no node id or interval.
Expected<ReplicaAsked> take_replica_parameters(csi::v1::CreateVolumeRequest* request);

}  // namespace rosetctl
