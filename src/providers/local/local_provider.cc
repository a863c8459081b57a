// Local directory volumes: ids "local-<16 hex>", data in <state>/volumes/<id>.
#include "providers/local/local_provider.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>

#include "core/mount_ops.h"
#include "core/random_id.h"
#include "core/remove_tree.h"

namespace rosetctl {
namespace {

// Parameter keys the external-provisioner adds (PVC/PV names): accepted and not interpreted.
constexpr std::string_view kKubernetesPrefix = "csi.storage.k8s.io/";

Status validate_parameters(const StringMap& parameters) {
  for (const auto& [key, value] : parameters) {
    if (key.starts_with(kKubernetesPrefix)) continue;
    if (key == "type") {
      if (value == "dir") continue;
      if (value == "image") {
        return error(Code::kInvalidArgument,
                     "parameter type=image (size-enforced image volumes) is not supported yet by "
                     "the local provider; use type=dir");
      }
      return error(Code::kInvalidArgument,
                   "parameter type=\"{}\" is not a local volume type; use type=dir", value);
    }
    return error(Code::kInvalidArgument,
                 "unknown parameter \"{}\" for the local provider (known: type)", key);
  }
  return Status::ok();
}

Status validate_capability(const Capability& capability) {
  if (capability.access_type == AccessType::kBlock) {
    return error(Code::kInvalidArgument,
                 "raw block volumes are not supported yet by the local provider; "
                 "request a mount volume");
  }
  return Status::ok();
}

}  // namespace

std::string LocalProvider::data_dir(std::string_view volume_id) const {
  return fmt::format("{}/{}", layout_.volumes_dir(), volume_id);
}

Status LocalProvider::check_health() const {
  if (::access(layout_.volumes_dir().c_str(), R_OK | W_OK | X_OK) != 0) {
    return errno_status(
        errno, fmt::format("local volume directory \"{}\" is not usable", layout_.volumes_dir()));
  }
  return Status::ok();
}

Status LocalProvider::validate_create(const CreateVolumeSpec& spec) const {
  ROSETCTL_RETURN_IF_ERROR(validate_parameters(spec.parameters));
  for (const Capability& capability : spec.capabilities) {
    ROSETCTL_RETURN_IF_ERROR(validate_capability(capability));
  }
  return Status::ok();
}

Expected<ProvisionedVolume> LocalProvider::create_volume(const CreateVolumeSpec& spec) {
  // For an empty volume nothing durable happens here: the directory appears on first stage
  // (emptyDir semantics), so the daemon's single insert of the volume record is the whole
  // creation.
  ProvisionedVolume volume;
  volume.id = fmt::format("local-{}", random_hex(8));
  volume.capacity_bytes = spec.required_bytes;
  volume.context = {{"type", "dir"}};
  // A restore or clone fills the data directory completely before the daemon records the
  // volume, so a recorded volume is never half filled.
  if (spec.source.kind != VolumeSource::Kind::kNone) {
    ROSETCTL_RETURN_IF_ERROR(populate_volume(volume.id, spec));
  }
  return volume;
}

Status LocalProvider::delete_volume(const VolumeRecord& volume) {
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

Expected<int64_t> LocalProvider::available_capacity() const {
  struct statvfs fs;
  if (::statvfs(layout_.volumes_dir().c_str(), &fs) != 0) {
    return errno_status(errno, fmt::format("cannot statfs \"{}\"", layout_.volumes_dir()));
  }
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

VolumeCondition LocalProvider::volume_condition(const VolumeRecord& volume) const {
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

Status LocalProvider::check_volume_on_node(std::string_view volume_id) const {
  auto record = store_.find_volume(volume_id);
  if (!record) return record.status();
  if (!record->has_value())
    return error(Code::kNotFound, "volume \"{}\" does not exist", volume_id);
  return Status::ok();
}

Status LocalProvider::ensure_data_dir(std::string_view volume_id) const {
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

Status LocalProvider::stage_volume(const StageSpec& spec) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_on_node(spec.volume_id));
  ROSETCTL_RETURN_IF_ERROR(ensure_data_dir(spec.volume_id));
  return bind_mount(data_dir(spec.volume_id), spec.staging_path, MountOptions{});
}

Status LocalProvider::unstage_volume(std::string_view /*volume_id*/,
                                     const std::string& staging_path) {
  return unmount_all(staging_path);
}

}  // namespace rosetctl
