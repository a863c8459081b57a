// Defaults shared by providers: publish/unpublish as bind mounts from the staging path, no
// mutable parameters, and no-op answers for what only some providers need (node expansion,
// reconcile); and the UNIMPLEMENTED answer for a part a provider lacks.
#include "providers/provider.h"

#include <algorithm>

#include "core/mount_ops.h"
#include "core/validate.h"

namespace rosetctl {

Status NodeSide::check_volume_on_node_given(std::string_view volume_id,
                                            const VolumeRecord* /*here*/) const {
  return check_volume_on_node(volume_id);
}

Status NodeSide::publish_volume(const PublishSpec& spec) {
  auto options = parse_mount_flags(spec.capability.mount_flags);
  if (!options) return options.status();
  options->read_only = options->read_only || spec.readonly;
  return bind_mount(spec.staging_path, spec.target_path, *options, spec.before_attach);
}

namespace {

Status no_snapshots(std::string_view provider) {
  return error(Code::kUnimplemented, "provider \"{}\" does not support snapshots", provider);
}

Status nothing_mutable(std::string_view provider, const StringMap& changes) {
  if (changes.empty()) return Status::ok();
  return error(Code::kInvalidArgument,
               "mutable parameter {} is not supported: volumes of provider \"{}\" have no "
               "parameters that can change after creation",
               display_quoted(changes.begin()->first), provider);
}

}  // namespace

Status ControllerSide::validate_mutable(const CreateVolumeSpec& spec) const {
  return nothing_mutable(name(), spec.mutable_parameters);
}

Status ControllerSide::check_mutable(const VolumeRecord& /*volume*/,
                                     const StringMap& parameters) const {
  return nothing_mutable(name(), parameters);
}

Status ControllerSide::modify_volume(const VolumeRecord& volume, const StringMap& changes) {
  return check_mutable(volume, changes);
}

Expected<StringMap> ControllerSide::map_to_node(const VolumeRecord&, const NodeRecord&,
                                                const StringMap&) {
  return StringMap{};
}

Status ControllerSide::unmap_from_node(const VolumeRecord&, const NodeRecord&) {
  return Status::ok();
}

Expected<StringMap> ControllerSide::publish_secrets(const VolumeRecord&, const NodeRecord&) {
  return StringMap{};
}

Status ControllerSide::reconcile_controller() {
  return Status::ok();
}

Status SnapshotSide::delete_snapshot_with(const SnapshotRecord& snapshot, const StringMap&,
                                          const ForgetSnapshot& forget) {
  ROSETCTL_RETURN_IF_ERROR(forget());
  return delete_snapshot(snapshot);
}

Expected<std::vector<TreeChange>> SnapshotSide::diff_snapshots(const SnapshotRecord&,
                                                               const SnapshotRecord&) {
  return no_snapshots(name());
}

Expected<SnapshotVerification> SnapshotSide::verify_snapshots(const std::vector<SnapshotRecord>&,
                                                              ProgressSink*) {
  return no_snapshots(name());
}

Status SnapshotSide::prepare_restore(std::string_view, bool) {
  return error(Code::kUnimplemented, "provider \"{}\" restores nothing ahead", name());
}

Expected<StorageCollection> SnapshotSide::collect_garbage(std::chrono::milliseconds) {
  return no_snapshots(name());
}

Status NodeSide::unpublish_volume(std::string_view /*volume_id*/, const std::string& target_path) {
  return unmount_topmost(target_path);
}

std::string ControllerSide::incompatibility(const VolumeRecord& /*existing*/,
                                            const CreateVolumeSpec& /*spec*/) const {
  return "";
}

std::string ControllerSide::capability_mismatch(const VolumeRecord& /*volume*/,
                                                const Capability& /*capability*/) const {
  return "";
}

Status ControllerSide::delete_volume_with(const VolumeRecord& volume,
                                          const StringMap& /*secrets*/) {
  return delete_volume(volume);
}

Status NodeSide::revive_staging(std::string_view volume_id, const std::string& staging_path) {
  return error(Code::kFailedPrecondition,
               "the staging of volume \"{}\" at \"{}\" is dead (its mount does not answer); "
               "unstage and stage it again",
               volume_id, staging_path);
}

Expected<ExpandedVolume> ControllerSide::expand_volume(const VolumeRecord& volume,
                                                       int64_t required_bytes,
                                                       int64_t /*limit_bytes*/) {
  return ExpandedVolume{std::max(volume.capacity_bytes, required_bytes), false};
}

Expected<int64_t> NodeSide::expand_on_node(const NodeExpandSpec& spec) {
  return spec.required_bytes;
}

VolumeCondition NodeSide::node_condition(std::string_view /*volume_id*/) const {
  return {};
}

Status NodeSide::reconcile_node(const VolumeLocker& /*lock*/) {
  return Status::ok();
}

Expected<ControllerSide*> controller_side(Provider& provider) {
  if (ControllerSide* side = provider.controller()) return side;
  return error(Code::kUnimplemented, "provider \"{}\" has no controller side on this host",
               provider.name());
}

Expected<SnapshotSide*> snapshot_side(Provider& provider) {
  if (SnapshotSide* side = provider.snapshots()) return side;
  return no_snapshots(provider.name());
}

Expected<NodeSide*> node_side(Provider& provider) {
  if (NodeSide* side = provider.node()) return side;
  return error(Code::kUnimplemented, "provider \"{}\" has no node side on this host",
               provider.name());
}

}  // namespace rosetctl
