// Checking and locking the source of a restore or clone.
#include "daemon/content_source.h"

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

Expected<ResolvedSource> resolve_snapshot(const ServiceContext& context, const std::string& id,
                                          const Provider& provider, int64_t required,
                                          int64_t limit) {
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
  return ResolvedSource{
      {VolumeSource::Kind::kSnapshot, (*snapshot)->commit_id}, capacity, std::move(*lock)};
}

Expected<ResolvedSource> resolve_volume(const ServiceContext& context, const std::string& id,
                                        const Provider& provider, int64_t required, int64_t limit) {
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
                                                int64_t limit_bytes) {
  if (!request.has_volume_content_source()) return ResolvedSource{};
  const csi::v1::VolumeContentSource& source = request.volume_content_source();
  if (source.has_snapshot()) {
    return resolve_snapshot(context, source.snapshot().snapshot_id(), provider, required_bytes,
                            limit_bytes);
  }
  return resolve_volume(context, source.volume().volume_id(), provider, required_bytes,
                        limit_bytes);
}

}  // namespace rosetctl
