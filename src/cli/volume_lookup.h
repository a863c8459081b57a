// Finding volumes by name or id through the CSI Controller service, what kind they are, and
// what the node knows of them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/csi_client.h"
#include "cli/session.h"
#include "providers/provider_registration.h"

namespace rosetctl::cli {

struct VolumeInfo {
  csi::v1::Volume volume;
  std::vector<std::string> published_nodes;
  bool abnormal = false;
  std::string condition;
};

// The volume named `name_or_id`, else the one with that id (names never equal another volume's
// id: the controller refuses such names, so the answer is never ambiguous); NOT_FOUND otherwise.
// CSI has no lookup by name, so the name is found in this host's state store (the controller's
// own records), and the volume itself through ControllerGetVolume: one call whatever the number
// of volumes, where paging through ListVolumes took 40 ms per 1,000 volumes.
Expected<VolumeInfo> resolve_volume(Session& session, std::string_view name_or_id);

// The same volume's id and name alone, for a verb that needs no more (`volume disconnect`):
// FindVolume's answer when the volume was found by its name, else resolve_volume's. One
// controller call instead of two for the usual case.
struct VolumeRef {
  std::string id;
  std::string name;
};
Expected<VolumeRef> resolve_volume_ref(Session& session, std::string_view name_or_id);
// Whether FindVolume answered `id` for `name_or_id` because that is the volume's name. Any other
// answer is the id asked for, or the same id in another form (a placed id of the controller's
// own node comes back local, a node's local id comes back placed): then only the volume itself
// has its name.
bool found_by_name(const std::string& id, std::string_view name_or_id);

// What the node that node calls reach (this host's, or --on-node's) records of each volume:
// its stagings and publications there, with their mounts' condition (rosetctl.v1.NodeState),
// in the order asked.
Expected<std::vector<v1::NodeVolume>> volumes_on_node(Session& session,
                                                      const std::vector<std::string>& volume_ids);
Expected<v1::NodeVolume> volume_on_node(Session& session, const std::string& volume_id);

// Every volume, following ListVolumes pages.
Expected<std::vector<VolumeInfo>> list_all_volumes(CsiClient& client,
                                                   std::vector<std::string>* unreachable);

std::string volume_name(const csi::v1::Volume& volume);

// True for raw block volumes (volume context access=block).
bool is_block_volume(const csi::v1::Volume& volume);

// True for volumes that can only be read (a roset volume restored from a commit: context
// readOnly=true).
bool is_read_only_volume(const csi::v1::Volume& volume);

// The capability the CLI attaches a volume with: single-node writer (multi-node reader for
// read-only volumes, multi-node writer where its provider among `providers` shares them between
// nodes), block or mount as the volume is (the filesystem of an image volume is the one it was
// created with).
csi::v1::VolumeCapability attach_capability(
    const csi::v1::Volume& volume,
    const std::vector<ProviderRegistration>& providers = registered_providers());

}  // namespace rosetctl::cli
