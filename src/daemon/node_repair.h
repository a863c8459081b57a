// Repair of dead node mounts: a staging whose mount no longer answers (ENOTCONN, as when the
// FUSE process behind it was killed) is revived by its provider, and the publications bound
// from it, dead with it, are bound again.
#pragma once

#include <string>
#include <string_view>

#include "daemon/service_context.h"

namespace rosetctl {

// Nothing to do when the staging answers. Publications are bound again with the volume's
// stored context, when this host has the record (else their own NodePublish repairs them).
// Call with the volume's stage lock held. True when it repaired something (mounts changed).
Expected<bool> repair_dead_staging(ServiceContext& context, NodeSide& node,
                                   std::string_view volume_id, const std::string& staging_path);

// True when `path` is a mount that no longer answers.
bool is_dead_mount(const std::string& path);

}  // namespace rosetctl
