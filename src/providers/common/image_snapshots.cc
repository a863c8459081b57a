// Snapshots, restores and clones of image volumes, and the choice of what a restored or cloned
// local volume becomes.
//
// A snapshot copies the image while it is held still (ImageNode::hold_still: its filesystem
// frozen where it is mounted here; a block volume's devices flushed), with the volume's stage
// lock held so that it is neither staged nor unstaged meanwhile; the copy is a reflink where the
// state directory's filesystem can share extents (xfs with reflink, btrfs), else a sparse copy.
// The copy then becomes one blob of the commit store (core/commit_store/commit_image.h) once it
// is hashed, after the thaw: so the commit id is a content hash like every commit's, equal
// images share their storage, and delete, garbage collection and verification work unchanged.
// A restore copies the blob into a new image the same way; a clone copies the live image.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "core/clock.h"
#include "core/commit_store/commit_image.h"
#include "core/commit_store/file_content.h"
#include "core/crash_point.h"
#include "core/log.h"
#include "core/unique_fd.h"
#include "core/validate.h"
#include "providers/common/local_storage.h"
#include "providers/common/mutable_parameters.h"

namespace rosetctl {
namespace {

std::string image_kind(const VolumeRecord& volume) {
  return is_block_volume(volume) ? "block" : filesystem_of(volume);
}

StringMap image_snapshot_context(const std::string& kind) {
  StringMap context = {
      {kContextType, std::string(kTypeImage)},
      {kContextAccess, std::string(kind == "block" ? kAccessBlock : kAccessMount)}};
  if (kind != "block") context[kContextFilesystem] = kind;
  return context;
}

// What a restore or clone starts from.
struct SourceContent {
  std::string what;   // "snapshot 3f9a0c1d2e4b", "volume \"db\"": for messages
  std::string image;  // "" for a directory; else the image's kind: "ext4", "xfs", "block"
  int64_t bytes = 0;  // an image's size
  std::optional<VolumeRecord> volume;  // the source volume of a clone
};

std::string describe_kind(const std::string& image) {
  if (image.empty()) return "a directory volume";
  if (image == "block") return "a raw block volume";
  return fmt::format("an {} image volume", image);
}

// INVALID_ARGUMENT when the request asks for another kind of volume than the source is.
Status check_fits(const CreateVolumeSpec& spec, const SourceContent& source) {
  auto type = spec.parameters.find(kContextType);
  bool names_type = type != spec.parameters.end();
  bool asks_block =
      std::any_of(spec.capabilities.begin(), spec.capabilities.end(),
                  [](const Capability& c) { return c.access_type == AccessType::kBlock; });
  if (source.image.empty()) {
    if (asks_block || (names_type && type->second == kTypeImage)) {
      return error(Code::kInvalidArgument,
                   "{} holds {}; it can only become a directory volume (no type=image, no block "
                   "access)",
                   source.what, describe_kind(source.image));
    }
    return Status::ok();
  }
  if (names_type && type->second == kTypeDir) {
    return error(Code::kInvalidArgument,
                 "{} holds {}; it can only become an image volume of the same kind (leave out "
                 "type=dir)",
                 source.what, describe_kind(source.image));
  }
  bool block = source.image == "block";
  if (asks_block != block) {
    return error(Code::kInvalidArgument, "{} holds {}; ask for {} access", source.what,
                 describe_kind(source.image), block ? "block" : "mount");
  }
  for (const Capability& capability : spec.capabilities) {
    if (!capability.fs_type.empty() && capability.fs_type != source.image) {
      return error(Code::kInvalidArgument,
                   "{} holds {}; volume_capabilities ask for fs_type {} (leave it out, or "
                   "ask for {})",
                   source.what, describe_kind(source.image), display_quoted(capability.fs_type),
                   source.image);
    }
  }
  return Status::ok();
}

// The stage lock of the volume being copied, when the daemon gave a way to take it.
Expected<std::optional<HeldLock>> hold_stagings(const StagingLocker& locker,
                                                std::string_view volume_id) {
  if (!locker) return std::optional<HeldLock>();
  auto held = locker(volume_id);
  if (!held) return held.status();
  return std::optional(std::move(*held));
}

Expected<UniqueFd> open_image(const std::string& path, const std::string& volume_name) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.valid()) return fd;
  if (errno == ENOENT) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\": its image \"{}\" is missing, so there is nothing to copy",
                 volume_name, path);
  }
  return errno_status(errno, fmt::format("cannot open image \"{}\"", path));
}

}  // namespace

Expected<ProvisionedSnapshot> LocalStorage::create_image_snapshot(const SnapshotSpec& spec,
                                                                  const VolumeRecord& volume,
                                                                  const RecordSnapshot& record) {
  auto store = commit_store();
  if (!store) return store.status();
  auto lock = (*store)->lock_shared(kStorePatience);
  if (!lock) return lock.status();
  int64_t time_ns = unix_now_ns();
  std::string path = images_.image(volume.id);
  auto image = open_image(path, volume.name);
  if (!image) return image.status();
  auto copy = [&]() -> Expected<ImageCopy> {
    auto staging = hold_stagings(spec.hold_stagings, volume.id);
    if (!staging) return staging.status();
    auto held = image_node_.hold_still(volume);  // thawed when this lambda returns
    if (!held) return held.status();
    crash_point("image-copy-frozen");
    return copy_image(**store, image->get(), path);
  }();
  if (!copy) return copy.status().with_context(fmt::format("volume \"{}\"", volume.name));
  ImageCommitRequest request{image_kind(volume), spec.volume_id, spec.volume_name, spec.parent_id,
                             spec.message,       time_ns,        spec.progress};
  auto outcome = commit_image_copy(**store, std::move(*copy), request, *lock);
  if (!outcome) return outcome.status().with_context(fmt::format("volume \"{}\"", volume.name));
  ProvisionedSnapshot snapshot{outcome->id,
                               outcome->commit.bytes,
                               outcome->commit.files,
                               outcome->new_bytes,
                               time_ns,
                               image_snapshot_context(request.kind)};
  if (Status recorded = record(snapshot); !recorded) {
    (void)(*store)->remove_commit(outcome->id);  // its blob goes at the next collection
    return recorded;
  }
  return snapshot;
}

Expected<ProvisionedVolume> LocalStorage::create_from_source(std::string volume_id,
                                                             const CreateVolumeSpec& spec) {
  SourceContent source;
  if (spec.source.kind == VolumeSource::Kind::kSnapshot) {
    source.what = fmt::format("snapshot {}", spec.source.id.substr(0, 12));
    auto store = commit_store();
    if (!store) return store.status();
    auto lock = (*store)->lock_shared(kStorePatience);
    if (!lock) return lock.status();
    auto stored = stored_image(**store, spec.source.id);
    if (!stored) return stored.status();
    if (stored->has_value()) {
      source.image = (*stored)->kind;
      source.bytes = (*stored)->size;
    }
  } else {
    auto volume = load(spec.source.id);
    if (!volume) return volume.status();
    source.what = fmt::format("volume \"{}\"", volume->name);
    if (is_image_volume(*volume)) {
      source.image = image_kind(*volume);
      source.bytes = volume->capacity_bytes;
    }
    source.volume = std::move(*volume);
  }
  ROSETCTL_RETURN_IF_ERROR(check_fits(spec, source));
  ROSETCTL_RETURN_IF_ERROR(
      check_mutable_parameters(initial_mutable_parameters(spec), !source.image.empty(), spec.name));

  ProvisionedVolume volume;
  volume.id = std::move(volume_id);
  if (source.image.empty()) {
    volume.capacity_bytes = spec.required_bytes;
    volume.context = {{kContextType, std::string(kTypeDir)}};
    ROSETCTL_RETURN_IF_ERROR(populate_volume(volume.id, spec));
    return volume;
  }
  ImagePlan plan;
  plan.block = source.image == "block";
  if (!plan.block) plan.filesystem = source.image;
  auto bytes = image_bytes(std::max(spec.required_bytes, source.bytes), spec.limit_bytes);
  if (!bytes) return bytes.status();
  plan.bytes = *bytes;
  if (source.volume) {
    ROSETCTL_RETURN_IF_ERROR(clone_image(volume.id, *source.volume, spec, plan.bytes));
  } else {
    ROSETCTL_RETURN_IF_ERROR(restore_image_snapshot(volume.id, spec, plan.bytes, !plan.block));
  }
  ROSETCTL_RETURN_IF_ERROR(set_image_mutable_parameters(volume, spec));
  volume.capacity_bytes = plan.bytes;
  volume.context = image_context(plan);
  return volume;
}

// A filesystem image may be smaller than the file holding it (a restore asked for more, or the
// source had a growth pending), so a restored or cloned mount volume grows its filesystem to
// the image at its first stage: a no-op when it fills the image already.
Status LocalStorage::restore_image_snapshot(std::string_view volume_id,
                                            const CreateVolumeSpec& spec, int64_t bytes,
                                            bool filesystem_follows) {
  auto store = commit_store();
  if (!store) return store.status();
  auto lock = (*store)->lock_shared(kStorePatience);
  if (!lock) return lock.status();
  auto stored = stored_image(**store, spec.source.id);
  if (!stored) return stored.status();
  if (!stored->has_value()) {
    return error(Code::kInternal, "snapshot {} no longer holds an image", spec.source.id);
  }
  Progress progress(spec.progress);
  progress.start(fmt::format("restoring {}", spec.source.id.substr(0, 12)), 1, (*stored)->size);
  Status restored = images_.create_filled(volume_id, bytes, filesystem_follows, [&](int fd) {
    return restore_image(**store, **stored, fd, *lock);
  });
  progress.finish();
  return restored;
}

Status LocalStorage::clone_image(std::string_view volume_id, const VolumeRecord& source,
                                 const CreateVolumeSpec& spec, int64_t bytes) {
  std::string path = images_.image(source.id);
  auto image = open_image(path, source.name);
  if (!image) return image.status();
  Progress progress(spec.progress);
  progress.start(fmt::format("cloning {}", source.name), 1, bytes);
  Status cloned =
      images_.create_filled(volume_id, bytes, !is_block_volume(source), [&](int fd) -> Status {
        auto staging = hold_stagings(spec.hold_stagings, source.id);
        if (!staging) return staging.status();
        auto held = image_node_.hold_still(source);  // thawed when this lambda returns
        if (!held) return held.status().with_context(fmt::format("volume \"{}\"", source.name));
        struct stat st;
        if (::fstat(image->get(), &st) != 0) {
          return errno_status(errno, fmt::format("cannot inspect image \"{}\"", path));
        }
        return clone_or_copy(image->get(), fd, st.st_size, path).status();
      });
  progress.finish();
  return cloned;
}

}  // namespace rosetctl
