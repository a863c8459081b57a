// Volumes kept on this host (local_storage.h): ids "<flavor name>-<16 hex>"; directories in
// <state>/volumes/<id>, images handed to ImageFiles / ImageNode.
#include "providers/common/local_storage.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "core/log.h"
#include "core/mount_ops.h"
#include "core/random_id.h"
#include "core/remove_tree.h"
#include "core/validate.h"
#include "providers/common/mutable_parameters.h"

namespace rosetctl {
namespace {

// The doctor's row for image volumes' promises beyond the free space.
constexpr const char* kFreeSpaceRow = "free-space";

Status validate_parameters(const StringMap& parameters, const StorageFlavor& flavor) {
  for (const auto& [key, value] : parameters) {
    if (key.starts_with(kKubernetesParameterPrefix)) continue;
    if (key == kContextType) {
      if (flavor.images_only && value == kTypeDir) {
        return error(Code::kInvalidArgument,
                     "parameter type=dir: {} volumes are always image-backed (type image)",
                     flavor.name);
      }
      if (value == kTypeDir || value == kTypeImage) continue;
      return error(Code::kInvalidArgument, "parameter type={} is not a {} volume type (types: {})",
                   display_quoted(value), flavor.name, flavor.images_only ? "image" : "dir, image");
    }
    if (key == kParameterDirectIo) continue;  // checked with the mutable parameters
    return error(Code::kInvalidArgument,
                 "unknown parameter {} for the {} provider (known: type, {})", display_quoted(key),
                 flavor.name, kParameterDirectIo);
  }
  return Status::ok();
}

bool asks_for_dir(const CreateVolumeSpec& spec) {
  auto type = spec.parameters.find(kContextType);
  return type != spec.parameters.end() && type->second == kTypeDir;
}

}  // namespace

LocalStorage::LocalStorage(StateLayout layout, StateStore& store, bool capacity_overcommit,
                           StorageFlavor flavor)
    : layout_(std::move(layout)),
      flavor_(std::move(flavor)),
      store_(store),
      images_(layout_.root + "/" + flavor_.images_dir, capacity_overcommit),
      image_node_(images_, store) {}

Expected<VolumeRecord> LocalStorage::load(std::string_view volume_id) const {
  auto record = store_.find_volume(volume_id);
  if (!record) return record.status();
  if (!record->has_value())
    return error(Code::kNotFound, "volume \"{}\" does not exist", volume_id);
  return std::move(**record);
}

std::string LocalStorage::data_dir(std::string_view volume_id) const {
  return fmt::format("{}/{}", layout_.volumes_dir(), volume_id);
}

Status LocalStorage::check_health() const {
  if (::access(layout_.volumes_dir().c_str(), R_OK | W_OK | X_OK) != 0) {
    return errno_status(
        errno, fmt::format("local volume directory \"{}\" is not usable", layout_.volumes_dir()));
  }
  return Status::ok();
}

Status LocalStorage::validate_create(const CreateVolumeSpec& spec) const {
  ROSETCTL_RETURN_IF_ERROR(validate_parameters(spec.parameters, flavor_));
  ROSETCTL_RETURN_IF_ERROR(validate_mutable(spec));
  bool block = std::any_of(spec.capabilities.begin(), spec.capabilities.end(),
                           [](const Capability& c) { return c.access_type == AccessType::kBlock; });
  if (block && asks_for_dir(spec)) {
    return error(Code::kInvalidArgument,
                 "a raw block volume is always image-backed; use type=image or leave type out");
  }
  if (!wants_image(spec)) return Status::ok();
  return plan_image(spec).status();
}

Status LocalStorage::validate_mutable(const CreateVolumeSpec& spec) const {
  // A restore or clone may be an image volume without saying so (its source decides):
  // create_from_source checks again once the source's kind is known.
  bool may_be_image = wants_image(spec) || spec.source.kind != VolumeSource::Kind::kNone;
  return check_mutable_parameters(initial_mutable_parameters(spec), may_be_image, spec.name);
}

Status LocalStorage::check_mutable(const VolumeRecord& volume, const StringMap& parameters) const {
  return check_mutable_parameters(parameters, is_image_volume(volume), volume.name);
}

Status LocalStorage::modify_volume(const VolumeRecord& volume, const StringMap& changes) {
  ROSETCTL_RETURN_IF_ERROR(check_mutable(volume, changes));
  DirectIo direct_io = direct_io_setting(changes);
  if (direct_io == DirectIo::kDefault) return Status::ok();
  Status applied = image_node_.set_direct_io(volume, direct_io == DirectIo::kOn);
  if (!applied && applied.code() == Code::kInvalidArgument &&
      direct_io == direct_io_setting(volume.mutable_parameters)) {
    // Asked again for what is recorded already (a CO's retry): nothing changes, so nothing
    // fails; the kernel still declines it for now, as the stage that ran buffered has logged.
    spdlog::warn("{}; it stays recorded", escape_text(applied.message()));
    return Status::ok();
  }
  return applied;
}

Expected<ProvisionedVolume> LocalStorage::create_volume(const CreateVolumeSpec& spec) {
  ProvisionedVolume volume;
  volume.id = fmt::format("{}-{}", flavor_.name, random_hex(8));
  // A restore or clone fills the new volume's data directory or image completely before the
  // daemon records the volume, so a recorded volume is never half filled.
  if (spec.source.kind != VolumeSource::Kind::kNone) return create_from_source(volume.id, spec);
  if (!wants_image(spec)) {
    // An empty volume needs nothing durable here: the directory appears on first stage
    // (emptyDir semantics), so the daemon's single insert of the volume record is the whole
    // creation.
    volume.capacity_bytes = spec.required_bytes;
    volume.context = {{kContextType, std::string(kTypeDir)}};
    return volume;
  }
  // The image is made now, so its space is promised from the start; it is formatted on first
  // stage, where the filesystem tools run on the node.
  auto plan = plan_image(spec);
  if (!plan) return plan.status();
  ROSETCTL_RETURN_IF_ERROR(images_.create(volume.id, plan->bytes));
  ROSETCTL_RETURN_IF_ERROR(set_image_mutable_parameters(volume, spec));
  volume.capacity_bytes = plan->bytes;
  volume.context = image_context(*plan);
  return volume;
}

Status LocalStorage::set_image_mutable_parameters(ProvisionedVolume& volume,
                                                  const CreateVolumeSpec& spec) {
  volume.mutable_parameters = initial_mutable_parameters(spec);
  if (direct_io_setting(volume.mutable_parameters) != DirectIo::kOn) return Status::ok();
  // Promise direct I/O only where the images' filesystem can do it. A copy (restore, clone)
  // may ask for coarser alignment only because it shares extents with its source: refusing it
  // would fail every restore a StorageClass with directIO=true asks for.
  bool copy = spec.source.kind != VolumeSource::Kind::kNone;
  Status possible = image_node_.check_direct_io_possible(volume.id, spec.name, copy);
  if (!possible) (void)images_.remove(volume.id);
  return possible;
}

std::string LocalStorage::incompatibility(const VolumeRecord& existing,
                                          const CreateVolumeSpec& spec) const {
  // A restore or clone is the kind of volume its source was (the daemon has checked that the
  // source is the same): a type it names must match, a filesystem only where one is named.
  bool from_source = !existing.content_source.empty();
  if ((!from_source || spec.parameters.contains(kContextType)) &&
      wants_image(spec) != is_image_volume(existing)) {
    return fmt::format("it is a {} volume", is_image_volume(existing) ? kTypeImage : kTypeDir);
  }
  if (from_source) {
    for (const Capability& capability : spec.capabilities) {
      if (std::string why = capability_mismatch(existing, capability); !why.empty()) return why;
    }
    return "";
  }
  auto plan = is_image_volume(existing) ? plan_image(spec) : Expected<ImagePlan>(ImagePlan{});
  if (plan && plan->filesystem != filesystem_of(existing)) {
    return fmt::format("it holds an {} filesystem, not {}", filesystem_of(existing),
                       plan->filesystem);
  }
  return "";
}

std::string LocalStorage::capability_mismatch(const VolumeRecord& volume,
                                              const Capability& capability) const {
  // Directory volumes have no filesystem of their own; block volumes no filesystem at all.
  if (!is_image_volume(volume) || is_block_volume(volume) || capability.fs_type.empty()) {
    return "";
  }
  if (capability.fs_type == filesystem_of(volume)) return "";
  return fmt::format("it holds an {} filesystem, not {}", filesystem_of(volume),
                     display_quoted(capability.fs_type));
}

Expected<ExpandedVolume> LocalStorage::expand_volume(const VolumeRecord& volume,
                                                     int64_t required_bytes, int64_t limit_bytes) {
  if (!is_image_volume(volume))
    return ControllerSide::expand_volume(volume, required_bytes, limit_bytes);
  auto bytes = image_bytes(std::max(required_bytes, volume.capacity_bytes), limit_bytes);
  if (!bytes) return bytes.status();
  // A mount volume's filesystem grows on the node (NodeExpandVolume, or the next stage); a
  // staged block volume's loop device takes the new size there too.
  ROSETCTL_RETURN_IF_ERROR(images_.grow(volume.id, *bytes, !is_block_volume(volume)));
  return ExpandedVolume{*bytes, true};
}

Status LocalStorage::delete_volume(const VolumeRecord& volume) {
  return is_image_volume(volume) ? delete_image_volume(volume) : delete_directory_volume(volume);
}

Status LocalStorage::delete_image_volume(const VolumeRecord& volume) {
  // No staging is left (the daemon checked), so any device still on the image is a leftover.
  auto released = image_node_.release_unused_devices(volume.id);
  if (!released) return released.status();
  auto remaining = loop_devices_backed_by(images_.image(volume.id));
  if (!remaining) return remaining.status();
  if (!remaining->empty()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\": its image is still in use through {} (mounted outside "
                 "rosetctl?); unmount it first",
                 volume.name, remaining->front().path);
  }
  return images_.remove(volume.id);
}

Status LocalStorage::delete_directory_volume(const VolumeRecord& volume) {
  // Its snapshots stay (they are independent of the volume); its stat cache goes.
  ROSETCTL_RETURN_IF_ERROR(forget_volume(volume.id));
  // Move the data out of the way atomically first, so a half-finished removal never looks like
  // a live volume; a retry finds the rest in the trash.
  std::string trashed = fmt::format("{}/{}", layout_.trash_dir(), volume.id);
  if (::rename(data_dir(volume.id).c_str(), trashed.c_str()) != 0 && errno != ENOENT) {
    if (errno == ENOTEMPTY || errno == EEXIST) {
      ROSETCTL_RETURN_IF_ERROR(remove_tree(trashed));
      if (::rename(data_dir(volume.id).c_str(), trashed.c_str()) == 0 || errno == ENOENT) {
        return remove_tree(trashed);
      }
    }
    return errno_status(errno, fmt::format("cannot move \"{}\" to the trash", data_dir(volume.id)));
  }
  return remove_tree(trashed);
}

Expected<int64_t> LocalStorage::available_capacity() const {
  return images_.available_bytes();
}

VolumeCondition LocalStorage::volume_condition(const VolumeRecord& volume) const {
  if (is_image_volume(volume)) return image_node_.condition(volume);
  auto stagings = store_.stagings(volume.id);
  if (!stagings || stagings->empty()) return {};
  switch (probe_path(data_dir(volume.id))) {
    case PathHealth::kOk:
      return {};
    case PathHealth::kMissing:
      return {true, fmt::format("data directory \"{}\" is missing while the volume is staged",
                                data_dir(volume.id))};
    default:
      return {true, fmt::format("data directory \"{}\" is not accessible", data_dir(volume.id))};
  }
}

Status LocalStorage::check_volume_on_node(std::string_view volume_id) const {
  return load(volume_id).status();
}

Status LocalStorage::check_volume_on_node_given(std::string_view volume_id,
                                                const VolumeRecord* here) const {
  return here ? Status::ok() : check_volume_on_node(volume_id);
}

Status LocalStorage::ensure_data_dir(std::string_view volume_id) const {
  std::string dir = data_dir(volume_id);
  if (::mkdir(dir.c_str(), 0777) == 0) {
    // emptyDir semantics: writable by the workload whatever user it runs as (umask aside).
    if (::chmod(dir.c_str(), 0777) != 0) {
      return errno_status(errno, fmt::format("cannot set the mode of \"{}\"", dir));
    }
  } else if (errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create volume directory \"{}\"", dir));
  }
  return Status::ok();
}

Status LocalStorage::stage_volume(const StageSpec& spec) {
  auto volume = load(spec.volume_id);
  if (!volume) return volume.status();
  if ((spec.capability.access_type == AccessType::kBlock) != is_block_volume(*volume)) {
    return error(Code::kInvalidArgument, "volume \"{}\" is a {} volume; stage it for {} access",
                 volume->name, volume->access_type, volume->access_type);
  }
  if (is_image_volume(*volume)) return image_node_.stage(*volume, spec);
  ROSETCTL_RETURN_IF_ERROR(ensure_data_dir(spec.volume_id));
  return bind_mount(data_dir(spec.volume_id), spec.staging_path, MountOptions{});
}

Status LocalStorage::unstage_volume(std::string_view volume_id, const std::string& staging_path) {
  auto volume = load(volume_id);
  if (volume && is_image_volume(*volume)) return image_node_.unstage(*volume, staging_path);
  return unmount_topmost(staging_path);
}

Status LocalStorage::publish_volume(const PublishSpec& spec) {
  std::optional<VolumeRecord> loaded;  // when the caller did not read the record
  if (!spec.volume) {
    auto volume = load(spec.volume_id);
    if (!volume) return volume.status();
    loaded = std::move(*volume);
  }
  const VolumeRecord& volume = spec.volume ? *spec.volume : *loaded;
  if (is_block_volume(volume)) return image_node_.publish_block(volume, spec);
  return NodeSide::publish_volume(spec);
}

Expected<int64_t> LocalStorage::expand_on_node(const NodeExpandSpec& spec) {
  auto volume = load(spec.volume_id);
  if (!volume) return volume.status();
  if (!is_image_volume(*volume)) return volume->capacity_bytes;  // nothing enforces the size
  return image_node_.expand(*volume, spec);
}

VolumeCondition LocalStorage::node_condition(std::string_view volume_id) const {
  auto volume = load(volume_id);
  if (!volume) return {true, volume.status().message()};
  return volume_condition(*volume);
}

std::vector<DoctorRow> LocalStorage::doctor_rows() const {
  return {{kLoopDevicesRow, "every loop device under the state directory is in use"},
          {kFreeSpaceRow, "free space covers what image volumes were promised",
           DoctorRow::Place::kSpace}};
}

std::vector<HostFinding> LocalStorage::inspect_host() {
  std::vector<HostFinding> found = image_node_.unaccounted_devices(layout_.root);
  if (::access(images_.dir().c_str(), F_OK) != 0) return found;  // no image volume yet
  auto balance = images_.space_balance();
  if (!balance) {
    found.push_back({kFreeSpaceRow, true, std::string(balance.status().message())});
  } else if (balance->promised_bytes > balance->free_bytes) {
    found.push_back(
        {kFreeSpaceRow, true,
         fmt::format("image volumes in \"{}\" may still write {} bytes but only {} are free: "
                     "a volume that fills up will fail its writes (ENOSPC); free space, or "
                     "delete or shrink volumes",
                     images_.dir(), balance->promised_bytes, balance->free_bytes)});
  }
  return found;
}

Status LocalStorage::reconcile_node(const VolumeLocker& lock) {
  return image_node_.reconcile(lock);
}

}  // namespace rosetctl
