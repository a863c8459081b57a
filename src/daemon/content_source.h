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

struct ResolvedSource {
  VolumeSource source;
  int64_t capacity_bytes = 0;  // the source volume's capacity (clones get at least that)
  HeldLock lock;               // keeps the source from being deleted while it is copied
};

// Looks the source up and locks it: NOT_FOUND when it does not exist, INVALID_ARGUMENT when it
// belongs to another provider, OUT_OF_RANGE when the requested capacity cannot hold it,
// ABORTED when it is being deleted.
Expected<ResolvedSource> resolve_content_source(const ServiceContext& context,
                                                const csi::v1::CreateVolumeRequest& request,
                                                const Provider& provider, int64_t required_bytes,
                                                int64_t limit_bytes);

}  // namespace rosetctl
