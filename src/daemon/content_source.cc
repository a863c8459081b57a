// Checking and locking the source of a restore or clone.
#include "daemon/content_source.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/validate.h"
#include "daemon/convert.h"
#include "daemon/snapshot_locks.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"

namespace rosetctl {
namespace {

Status check_capacity(std::string_view what, int64_t needed, int64_t required, int64_t limit) {
  if (required > 0 && required < needed) {
    return error(Code::kOutOfRange,
                 "capacity_range.required_bytes {} is smaller than {} ({} bytes); request at "
                 "least that much",
                 required, what, needed);
  }
  if (limit > 0 && limit < needed) {
    return error(Code::kOutOfRange, "capacity_range.limit_bytes {} is smaller than {} ({} bytes)",
                 limit, what, needed);
  }
  return Status::ok();
}

// The id of snapshot `id` in this host's store: another host's is copied here first
// (remote_sources.h).
Expected<std::string> snapshot_here(const ServiceContext& context, const std::string& id) {
  if (!context.remote_sources) return id;
  return context.remote_sources->snapshot_here(context, id);
}

// `of_volume`: when the snapshot stands in for a volume (a clone across nodes), the volume it
// must have been taken of.
Expected<ResolvedSource> resolve_snapshot(const ServiceContext& context,
                                          const std::string& requested, const Provider& provider,
                                          int64_t required, int64_t limit,
                                          std::string_view of_volume = {}) {
  auto here = snapshot_here(context, requested);
  if (!here) return here.status();
  const std::string& id = *here;
  auto lock = context.locks.try_lock(snapshot_lock_key(id), LockMode::kShared,
                                     busy_message(fmt::format("snapshot {}", id)));
  if (!lock) return lock.status();
  auto snapshot = context.store.find_snapshot(id);
  if (!snapshot) return snapshot.status();
  if (!snapshot->has_value()) {
    return error(Code::kNotFound, "volume_content_source: snapshot {} does not exist", id);
  }
  if (!(*snapshot)->ready) {
    return error(Code::kFailedPrecondition,
                 "volume_content_source: snapshot {} is not ready yet; restore it once "
                 "ListSnapshots reports ready_to_use",
                 id);
  }
  if (!of_volume.empty() && (*snapshot)->source_volume_id != of_volume) {
    return error(Code::kInvalidArgument,
                 "volume_content_source: snapshot {} was taken of volume \"{}\", not of \"{}\" "
                 "which is to be cloned",
                 requested, (*snapshot)->source_volume_id, of_volume);
  }
  if ((*snapshot)->provider != provider.name()) {
    return error(Code::kInvalidArgument,
                 "snapshot {} belongs to provider \"{}\"; it can only be restored there", id,
                 (*snapshot)->provider);
  }
  int64_t needed = restore_size_bytes(**snapshot);
  ROSETCTL_RETURN_IF_ERROR(check_capacity(fmt::format("snapshot {}", id), needed, required, limit));
  // A restore without a size gets its source's; a source that had none (0: unknown) passes
  // that on, as it would to a clone.
  int64_t capacity = (*snapshot)->source_capacity_bytes > 0 ? needed : 0;
  // A snapshot pulled from another node says which (snapshot_pull.cc); "?" for one pulled before
  // records said so, which is no more this host's own.
  bool from_another_host = !(*snapshot)->pulled_from.empty();
  return ResolvedSource{{VolumeSource::Kind::kSnapshot, (*snapshot)->commit_id, from_another_host},
                        capacity,
                        std::move(*lock)};
}

// A clone copies a volume in place. A volume of another node is copied by way of a snapshot of
// it there: the controller takes one and names it (`clone_by`, kCloneBySnapshotKey); it is
// fetched and restored as a restore from it would be, and the volume is recorded as a clone of
// the volume (remote_sources.h; the controller's side is cluster/cross_node_clone.cc).
Expected<ResolvedSource> resolve_volume(const ServiceContext& context, const std::string& id,
                                        const Provider& provider, int64_t required, int64_t limit,
                                        const std::string& clone_by) {
  // Another host's volume is cloned by way of a snapshot of it there (remote_sources.h).
  std::optional<std::string> snapshot;
  if (context.remote_sources) {
    auto by = context.remote_sources->clone_by_snapshot(context, id, clone_by);
    if (!by) return by.status();
    snapshot = std::move(*by);
  }
  if (snapshot) {
    auto resolved = resolve_snapshot(context, *snapshot, provider, required, limit, id);
    if (!resolved) {
      return resolved.status().with_context(
          fmt::format("cloning volume {} by way of its snapshot {}", id, *snapshot));
    }
    return resolved;
  }
  auto lock = try_lock_volume(context.locks, id, LockMode::kShared);
  if (!lock) return lock.status();
  auto volume = load_volume(context, id);
  if (!volume) {
    if (volume.status().code() != Code::kNotFound) return volume.status();
    return error(Code::kNotFound, "volume_content_source: volume \"{}\" does not exist", id);
  }
  if (volume->provider != &provider) {
    return error(Code::kInvalidArgument,
                 "volume \"{}\" belongs to provider \"{}\"; it can only be cloned there", id,
                 volume->record.provider);
  }
  ROSETCTL_RETURN_IF_ERROR(check_capacity(fmt::format("volume \"{}\"", volume->record.name),
                                          volume->record.capacity_bytes, required, limit));
  return ResolvedSource{
      {VolumeSource::Kind::kVolume, id}, volume->record.capacity_bytes, std::move(*lock)};
}

}  // namespace

int64_t restore_size_bytes(const SnapshotRecord& snapshot) {
  return std::max(snapshot.size_bytes, snapshot.source_capacity_bytes);
}

Expected<std::string> content_source_key(const csi::v1::CreateVolumeRequest& request) {
  if (!request.has_volume_content_source()) return std::string();
  const csi::v1::VolumeContentSource& source = request.volume_content_source();
  if (source.has_snapshot()) {
    ROSETCTL_RETURN_IF_ERROR(
        validate_id(source.snapshot().snapshot_id(), "volume_content_source.snapshot.snapshot_id"));
    return fmt::format("{}{}", kContentSourceSnapshot, source.snapshot().snapshot_id());
  }
  if (source.has_volume()) {
    ROSETCTL_RETURN_IF_ERROR(
        validate_id(source.volume().volume_id(), "volume_content_source.volume.volume_id"));
    return fmt::format("{}{}", kContentSourceVolume, source.volume().volume_id());
  }
  return error(Code::kInvalidArgument,
               "volume_content_source names neither a snapshot nor a volume");
}

Expected<ResolvedSource> resolve_content_source(const ServiceContext& context,
                                                const csi::v1::CreateVolumeRequest& request,
                                                const Provider& provider, int64_t required_bytes,
                                                int64_t limit_bytes, const std::string& clone_by) {
  if (!request.has_volume_content_source()) return ResolvedSource{};
  const csi::v1::VolumeContentSource& source = request.volume_content_source();
  if (source.has_snapshot()) {
    return resolve_snapshot(context, source.snapshot().snapshot_id(), provider, required_bytes,
                            limit_bytes);
  }
  return resolve_volume(context, source.volume().volume_id(), provider, required_bytes, limit_bytes,
                        clone_by);
}

}  // namespace rosetctl
