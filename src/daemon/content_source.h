// CreateVolume's volume_content_source: a snapshot to restore or a volume to clone.
#pragma once

#include <string>

#include "core/lock_space.h"
#include "csi.pb.h"
#include "daemon/service_context.h"

namespace rosetctl {

// The source as VolumeRecord::content_source stores it ("snapshot:<id>", "volume:<id>", or ""
// when the request has none), for comparing a repeated CreateVolume. INVALID_ARGUMENT for a
// source without an id or of a kind this plugin does not know.
Expected<std::string> content_source_key(const csi::v1::CreateVolumeRequest& request);

// The least a volume restored from `snapshot` may be: the size its volume had when it was
// taken, or the bytes of its files where they are more (a directory volume's size is not
// enforced). CSI's Snapshot.size_bytes.
int64_t restore_size_bytes(const SnapshotRecord& snapshot);

struct ResolvedSource {
  VolumeSource source;
  // The size a volume made from it gets at least: the source volume's capacity for a clone,
  // the restore size for a snapshot whose volume had a size (0: none recorded).
  int64_t capacity_bytes = 0;
  HeldLock lock;  // keeps the source from being deleted while it is copied
};

// Looks the source up and locks it: NOT_FOUND when it does not exist, INVALID_ARGUMENT when it
// belongs to another provider, OUT_OF_RANGE when the requested capacity cannot hold it,
// ABORTED when it is being deleted. A volume of another node is cloned by `clone_by`, a
// snapshot of it there the controller took (kCloneBySnapshotKey); without one, such a clone is
// FAILED_PRECONDITION.
Expected<ResolvedSource> resolve_content_source(const ServiceContext& context,
                                                const csi::v1::CreateVolumeRequest& request,
                                                const Provider& provider, int64_t required_bytes,
                                                int64_t limit_bytes,
                                                const std::string& clone_by = {});

}  // namespace rosetctl
