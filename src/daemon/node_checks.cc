// The Node calls' shared request checks (node_checks.h).
#include "daemon/node_checks.h"

#include <sys/stat.h>

#include <cerrno>

#include "core/validate.h"
#include "daemon/convert.h"
#include "daemon/node_paths.h"

namespace rosetctl {

Expected<Capability> required_capability(bool present, const csi::v1::VolumeCapability& proto) {
  if (!present) return error(Code::kInvalidArgument, "volume_capability is required");
  return capability_from_proto(proto, "volume_capability");
}

Status check_access_type(std::string_view volume_id, const VolumeRecord* record,
                         const Capability& capability) {
  if (!record) return Status::ok();
  std::string_view wanted = capability.access_type == AccessType::kBlock ? "block" : "mount";
  if (record->access_type != wanted) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is a {} volume; it cannot be used for {} access", volume_id,
                 record->access_type, wanted);
  }
  return Status::ok();
}

Status check_access_type(const ServiceContext& context, std::string_view volume_id,
                         const Capability& capability) {
  auto record = context.store.find_volume(volume_id);
  if (!record) return record.status();
  return check_access_type(volume_id, record->has_value() ? &**record : nullptr, capability);
}

Expected<std::string> path_to_release(const StateLayout& layout, std::string_view path,
                                      std::string_view field, const std::string& allowed) {
  auto checked = checked_mount_path(layout, path, field, allowed);
  if (checked || checked.status().code() != Code::kInvalidArgument) return checked;
  auto normal = normalize_absolute_path(path, field);
  if (!normal) return normal.status();
  struct stat st;
  if (::lstat(normal->c_str(), &st) == 0 || errno != ENOENT) return checked.status();
  return normal;
}

}  // namespace rosetctl
