// Finding volumes by name or id through the CSI Controller service, and what kind they are.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/csi_client.h"

namespace rosetctl::cli {

struct VolumeInfo {
  csi::v1::Volume volume;
  std::vector<std::string> published_nodes;
  bool abnormal = false;
  std::string condition;
};

// `name_or_id` is tried as an id first, then as a name (names never equal another volume's id:
// the controller refuses such names, so the answer is never ambiguous). NOT_FOUND otherwise.
Expected<VolumeInfo> resolve_volume(CsiClient& client, std::string_view name_or_id);

// Every volume, following ListVolumes pages.
Expected<std::vector<VolumeInfo>> list_all_volumes(CsiClient& client);

std::string volume_name(const csi::v1::Volume& volume);

// True for raw block volumes (volume context access=block).
bool is_block_volume(const csi::v1::Volume& volume);

// The capability the CLI attaches a volume with: single-node writer, block or mount as the
// volume is (the filesystem of an image volume is the one it was created with).
csi::v1::VolumeCapability attach_capability(const csi::v1::Volume& volume);

}  // namespace rosetctl::cli
