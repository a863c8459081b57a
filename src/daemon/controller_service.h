// CSI Controller on this host: volume lifecycle, publication to nodes, listing, capacity and
// snapshots.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "csi.grpc.pb.h"
#include "daemon/background_work.h"
#include "daemon/controller_checks.h"
#include "daemon/service_context.h"
#include "daemon/volume_lookup.h"

namespace rosetctl {

// What the checks of a CreateVolume read from it (ControllerService::create_checks), kept so
// that they run once: create_volume takes them instead of checking the request again.
struct CreateChecks {
  std::vector<Capability> capabilities;
  AccessType access_type = AccessType::kMount;
  CapacityRange range;
  std::string source_key;  // VolumeRecord::content_source
  StringMap parameters;    // as given, with the daemon's own `provider`
  Provider* provider = nullptr;
  ControllerSide* controller = nullptr;
};

// This host's Controller: what each CSI Controller call does to the volumes and snapshots this
// plugin's own store and providers hold. It knows no other host: which host a call is for is
// decided before it gets here (cluster/routing_controller.h, the gRPC service, which calls these
// for this host and forwards the rest). Each method checks its request, locks, and answers.
class ControllerService {
 public:
  explicit ControllerService(ServiceContext& context) : context_(context) {}

  // The checks of a CreateVolume that come before anything is looked up or made (name,
  // capabilities, capacity, content source), and the provider that would make the volume.
  Expected<CreateChecks> create_checks(const csi::v1::CreateVolumeRequest& request);
  // `checked`: create_checks' answer for this request. `clone_by`: the snapshot a clone of
  // another node's volume is made by (kCloneBySnapshotKey).
  Status create_volume(const csi::v1::CreateVolumeRequest& request, const CreateChecks& checked,
                       csi::v1::CreateVolumeResponse* response, const std::string& clone_by = {});
  Status delete_volume(const csi::v1::DeleteVolumeRequest& request);
  Status publish_volume(const csi::v1::ControllerPublishVolumeRequest& request,
                        csi::v1::ControllerPublishVolumeResponse* response);
  Status unpublish_volume(const csi::v1::ControllerUnpublishVolumeRequest& request);
  Status validate_capabilities(const csi::v1::ValidateVolumeCapabilitiesRequest& request,
                               csi::v1::ValidateVolumeCapabilitiesResponse* response);
  Status list_volumes(const csi::v1::ListVolumesRequest& request,
                      csi::v1::ListVolumesResponse* response);
  // The provider a GetCapacity asks about: the one its parameters name, else the default.
  Expected<Provider*> capacity_provider(const csi::v1::GetCapacityRequest& request);
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
  // ControllerPublishVolume's target: this plugin's own node, or one in its registry
  // (NOT_FOUND, the spec's code for a node that does not exist, otherwise).
  Status check_node_registered(std::string_view node_id);

 private:
  // The provider a CreateVolume names, else its content source's, else the default one.
  Expected<Provider*> create_provider(const StringMap& parameters,
                                      const csi::v1::CreateVolumeRequest& request);
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

  ServiceContext& context_;
  BackgroundWork background_;  // last: destroyed (joined) first, while the context still lives
};

}  // namespace rosetctl
