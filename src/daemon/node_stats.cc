// NodeGetVolumeStats and NodeExpandVolume of this host (node_service.h): what a published or
// staged volume holds, and growing what is staged to the volume's new size.
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstring>

#include "core/loop_device.h"
#include "core/mount_ops.h"
#include "core/validate.h"
#include "daemon/node_checks.h"
#include "daemon/node_mounts.h"
#include "daemon/node_paths.h"
#include "daemon/node_service.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"

namespace rosetctl {
namespace {

// Bytes and inodes of the filesystem at `path`, or the size of the block device there.
Status fill_usage(const std::string& path, csi::v1::NodeGetVolumeStatsResponse* response) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", path));
  }
  auto* bytes = response->add_usage();
  bytes->set_unit(csi::v1::VolumeUsage::BYTES);
  if (S_ISBLK(st.st_mode)) {  // a raw block volume: only its size is known
    auto size = block_device_size(path);
    if (!size) return size.status();
    bytes->set_total(*size);
    return Status::ok();
  }
  struct statvfs fs;
  if (::statvfs(path.c_str(), &fs) != 0) {
    return errno_status(errno, fmt::format("cannot statfs \"{}\"", path));
  }
  auto unit = static_cast<int64_t>(fs.f_frsize);
  bytes->set_total(static_cast<int64_t>(fs.f_blocks) * unit);
  bytes->set_available(static_cast<int64_t>(fs.f_bavail) * unit);
  bytes->set_used(static_cast<int64_t>(fs.f_blocks - fs.f_bfree) * unit);
  auto* inodes = response->add_usage();
  inodes->set_unit(csi::v1::VolumeUsage::INODES);
  inodes->set_total(static_cast<int64_t>(fs.f_files));
  inodes->set_available(static_cast<int64_t>(fs.f_favail));
  inodes->set_used(static_cast<int64_t>(fs.f_files - fs.f_ffree));
  return Status::ok();
}
}  // namespace

Status NodeService::volume_stats(const csi::v1::NodeGetVolumeStatsRequest& request,
                                 csi::v1::NodeGetVolumeStatsResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  if (request.volume_path().empty())
    return error(Code::kInvalidArgument, "volume_path is required");
  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  ROSETCTL_RETURN_IF_ERROR((*node)->check_volume_on_node(request.volume_id()));
  // Only a path where this node staged or published this volume has its stats (spec: NOT_FOUND
  // when the volume is not at volume_path).
  auto path = normalize_absolute_path(request.volume_path(), "volume_path");
  Status not_here = error(Code::kNotFound, "volume \"{}\" is not staged or published at {}",
                          request.volume_id(), display_quoted(request.volume_path()));
  if (!path) return not_here;
  auto canonical = canonical_mount_path(*path, "volume_path");
  if (!canonical) return not_here;
  auto published = context_.store.find_node_publication(*canonical);
  if (!published) return published.status();
  auto staged = context_.store.find_staging(request.volume_id(), *canonical);
  if (!staged) return staged.status();
  bool ours = (published->has_value() && (*published)->volume_id == request.volume_id()) ||
              staged->has_value();
  if (!ours) return not_here;
  path = *canonical;

  int err = 0;
  PathHealth health = probe_path(*path, &err);
  if (health == PathHealth::kMissing) {
    return error(Code::kNotFound, "volume_path \"{}\" does not exist", *path);
  }
  auto* condition = response->mutable_volume_condition();
  if (health != PathHealth::kOk) {
    condition->set_abnormal(true);
    condition->set_message(fmt::format("\"{}\" is not accessible: {}", *path, std::strerror(err)));
    return Status::ok();
  }
  // Usage of the directory underneath, or of someone else's mount, would describe the wrong
  // filesystem.
  RecordedMount recorded = published->has_value() && (*published)->volume_id == request.volume_id()
                               ? (*published)->mount
                               : (*staged)->mount;
  std::string problem = recorded_mount_problem(*path, recorded);
  if (!problem.empty()) {
    condition->set_abnormal(true);
    condition->set_message(problem);
    return Status::ok();
  }
  ROSETCTL_RETURN_IF_ERROR(fill_usage(*path, response));
  VolumeCondition health_here = (*node)->node_condition(request.volume_id());
  condition->set_abnormal(health_here.abnormal);
  condition->set_message(health_here.abnormal ? health_here.message : "volume is healthy");
  return Status::ok();
}

// ---------------------------------------------------------------- expand

Status NodeService::expand_volume(const csi::v1::NodeExpandVolumeRequest& request,
                                  csi::v1::NodeExpandVolumeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  if (request.volume_path().empty())
    return error(Code::kInvalidArgument, "volume_path is required");
  // An unknown volume is NOT_FOUND before anything about the path is judged (csi-sanity asks
  // for NOT_FOUND with a relative path and an unknown id).
  auto owner = context_.providers.node_for_volume(request.volume_id());
  if (!owner) return owner.status();
  ROSETCTL_RETURN_IF_ERROR((*owner)->check_volume_on_node(request.volume_id()));
  auto path = normalize_absolute_path(request.volume_path(), "volume_path");
  if (!path) {
    return error(Code::kNotFound, "volume \"{}\" is not at {}", request.volume_id(),
                 display_quoted(request.volume_path()));
  }
  std::string staging;
  if (!request.staging_target_path().empty()) {
    auto normal = normalize_absolute_path(request.staging_target_path(), "staging_target_path");
    if (!normal) return normal.status();
    staging = *normal;
  }
  if (request.capacity_range().required_bytes() < 0) {
    return error(Code::kInvalidArgument, "capacity_range.required_bytes must not be negative");
  }

  // Exclusive with stage/unstage: the device and filesystem must stay put while they grow.
  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  auto stage_lock = try_lock_stage(context_.locks, request.volume_id(), LockMode::kExclusive);
  if (!stage_lock) return stage_lock.status();

  auto node = context_.providers.node_for_volume(request.volume_id());
  if (!node) return node.status();
  ROSETCTL_RETURN_IF_ERROR((*node)->check_volume_on_node(request.volume_id()));
  if (probe_path(*path) == PathHealth::kMissing) {
    return error(Code::kNotFound, "volume_path \"{}\" does not exist", *path);
  }
  NodeExpandSpec spec{request.volume_id(), *path, staging,
                      request.capacity_range().required_bytes()};
  auto capacity = (*node)->expand_on_node(spec);
  if (!capacity) return capacity.status();
  response->set_capacity_bytes(*capacity);
  return Status::ok();
}

}  // namespace rosetctl
