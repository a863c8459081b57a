// The request checks the Node calls of this host share (daemon/node_service.h): the capability a
// call must carry, its access type against the volume's record, and the paths unstage and
// unpublish release.
#pragma once

#include <string>
#include <string_view>

#include "core/state_layout.h"
#include "core/status.h"
#include "csi.pb.h"
#include "daemon/service_context.h"
#include "providers/provider.h"

namespace rosetctl {

// The request's volume_capability: INVALID_ARGUMENT when `present` is false or it is invalid.
Expected<Capability> required_capability(bool present, const csi::v1::VolumeCapability& proto);

// The spec's "exceeds capabilities" (FAILED_PRECONDITION): mount access to a block volume or the
// reverse. Only checkable where the volume record lives on this host (`record`, else null).
Status check_access_type(std::string_view volume_id, const VolumeRecord* record,
                         const Capability& capability);
// The same, reading the record from this host's store.
Status check_access_type(const ServiceContext& context, std::string_view volume_id,
                         const Capability& capability);

// For unstage/unpublish: a path that no longer exists (kubelet may have removed its parent)
// cannot be mounted, so its normalised form is enough to find and drop our records.
Expected<std::string> path_to_release(const StateLayout& layout, std::string_view path,
                                      std::string_view field, const std::string& allowed);

}  // namespace rosetctl
