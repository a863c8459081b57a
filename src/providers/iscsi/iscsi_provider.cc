// The iscsi provider: image volumes exported over iSCSI.
#include "providers/iscsi/iscsi_provider.h"

#include <sys/stat.h>

#include "core/block_staging.h"
#include "core/log.h"
#include "core/mount_ops.h"
#include "core/validate.h"
#include "providers/volume_context.h"

namespace rosetctl::iscsi {
namespace {

// How often the controller looks at tgtd: a restarted or emptied tgtd gets its targets back
// within about this long (issue 31, row 10), well inside open-iscsi's replacement timeout.
constexpr auto kWatchInterval = std::chrono::seconds(2);
// The doctor's row for sessions no staging accounts for.
constexpr const char* kSessionsRow = "iscsi-sessions";

}  // namespace

IscsiProvider::IscsiProvider(const StateLayout& layout, StateStore& store, bool capacity_overcommit,
                             IscsiSettings settings, std::unique_ptr<TargetBackend> backend,
                             Status backend_problem)
    : settings_(std::move(settings)),
      store_(store),
      images_(layout, store, capacity_overcommit,
              StorageFlavor{.name = "iscsi", .images_dir = "iscsi-images", .images_only = true}),
      backend_problem_(std::move(backend_problem)),
      node_(OpenIscsi()) {
  if (backend) {
    exports_ = std::make_unique<IscsiExports>(
        std::string(name()), std::move(backend), settings_.portal, store,
        [this](std::string_view volume_id) { return images_.image_path(volume_id); },
        ChapRecords(layout.root + "/iscsi/chap"));
  }
}

Expected<IscsiExports*> IscsiProvider::exports() const {
  if (exports_) return exports_.get();
  if (!backend_problem_) return backend_problem_;
  return error(Code::kFailedPrecondition,
               "this rosetctl serves no controller side for iscsi volumes");
}

bool IscsiProvider::in_use() const {
  auto found = store_.has_volumes_of(name());
  return !found || *found;  // cannot tell: better to check than to hide a problem
}

bool IscsiProvider::health_check_may_block() const {
  return settings_.is_default || in_use();  // then it runs tgtadm or iscsiadm
}

std::vector<ProviderGauge> IscsiProvider::gauges() {
  if (!exports_ || !in_use()) return {};
  auto targets = exports_->backend().list_targets();
  if (!targets) return {};  // the target daemon is down: Probe says so
  int sessions = 0;
  for (const TargetInfo& target : *targets)
    sessions += target.sessions;
  return {
      {"rosetctl_iscsi_targets", "iSCSI targets of this controller's volumes in the target daemon",
       static_cast<double>(targets->size())},
      {"rosetctl_iscsi_sessions", "Initiator sessions logged in to this controller's targets",
       static_cast<double>(sessions)}};
}

Status IscsiProvider::check_health() const {
  // A host that never uses iSCSI is not unready for lack of a target daemon or open-iscsi.
  if (!settings_.is_default && !in_use()) return Status::ok();
  if (settings_.controller_role) {
    auto exports = this->exports();
    if (!exports) return exports.status();
    Status target = (*exports)->backend().check_health();
    if (!target) return target;
    ROSETCTL_RETURN_IF_ERROR((*exports)->targets_problem());
  }
  if (settings_.node_role && settings_.is_default) return node_.check_installed();
  return Status::ok();
}

CreateVolumeSpec IscsiProvider::as_image(const CreateVolumeSpec& spec) {
  CreateVolumeSpec image = spec;
  image.parameters.try_emplace(std::string(kContextType), std::string(kTypeImage));
  return image;
}

// ---------------------------------------------------------------- controller side

Status IscsiProvider::validate_create(const CreateVolumeSpec& spec) const {
  for (const Capability& capability : spec.capabilities) {
    // One filesystem mounted by two hosts at once destroys it; a raw disk is the caller's to
    // share (a cluster filesystem, a database that coordinates).
    if (capability.access_type == AccessType::kMount &&
        capability.access_mode == AccessMode::kMultiNodeMultiWriter) {
      return error(Code::kInvalidArgument,
                   "an iscsi mount volume cannot be written from several nodes at once (its "
                   "filesystem is not a cluster filesystem); ask for a single-node access mode, or "
                   "a block volume");
    }
  }
  ROSETCTL_RETURN_IF_ERROR(exports().status());
  return images_.validate_create(as_image(spec));
}

Expected<ProvisionedVolume> IscsiProvider::create_volume(const CreateVolumeSpec& spec) {
  auto exports = this->exports();
  if (!exports) return exports.status();
  auto volume = images_.create_volume(as_image(spec));
  if (!volume) return volume.status();
  // Exported at once, so that the target exists whenever the volume does; the image goes
  // again when that fails (the daemon has recorded nothing yet).
  if (Status exported = (*exports)->export_volume(volume->id); !exported) {
    VolumeRecord record;
    record.id = volume->id;
    record.name = spec.name;
    record.context = volume->context;
    (void)images_.delete_volume(record);
    return exported;
  }
  return volume;
}

Status IscsiProvider::delete_volume(const VolumeRecord& volume) {
  // The daemon refused while the volume is mapped; a target without ACL entries lets no one in.
  auto exports = this->exports();
  if (!exports) return exports.status();
  ROSETCTL_RETURN_IF_ERROR((*exports)->unexport_volume(volume.id));
  return images_.delete_volume(volume);
}

Expected<int64_t> IscsiProvider::available_capacity() const {
  return images_.available_capacity();
}

VolumeCondition IscsiProvider::volume_condition(const VolumeRecord& volume) const {
  VolumeCondition image = images_.volume_condition(volume);
  if (image.abnormal || !exports_) return image;
  return exports_->target_condition(volume.id);
}

std::string IscsiProvider::incompatibility(const VolumeRecord& existing,
                                           const CreateVolumeSpec& spec) const {
  return images_.incompatibility(existing, as_image(spec));
}

std::string IscsiProvider::capability_mismatch(const VolumeRecord& volume,
                                               const Capability& capability) const {
  return images_.capability_mismatch(volume, capability);
}

Expected<ExpandedVolume> IscsiProvider::expand_volume(const VolumeRecord& volume,
                                                      int64_t required_bytes, int64_t limit_bytes) {
  auto exports = this->exports();
  if (!exports) return exports.status();
  auto expanded = images_.expand_volume(volume, required_bytes, limit_bytes);
  if (!expanded) return expanded.status();
  ROSETCTL_RETURN_IF_ERROR((*exports)->resize(volume.id));
  // Every consumer must rescan its session (and grow the filesystem of a mount volume).
  expanded->node_expansion_required = true;
  return expanded;
}

Expected<StringMap> IscsiProvider::map_to_node(const VolumeRecord& volume, const NodeRecord& node,
                                               const StringMap& secrets) {
  if (settings_.portal.empty()) {
    return error(Code::kFailedPrecondition,
                 "no iSCSI portal is set for consumers to log in to: start the controller with "
                 "--iscsi-portal ADDR:PORT (the address tgtd listens on, as consumers reach it)");
  }
  auto exports = this->exports();
  if (!exports) return exports.status();
  auto chap = chap_from_secrets(secrets);
  if (!chap) return chap.status();
  return (*exports)->map(volume.id, node, *chap);
}

Status IscsiProvider::unmap_from_node(const VolumeRecord& volume, const NodeRecord& node) {
  auto exports = this->exports();
  if (!exports) return exports.status();
  return (*exports)->unmap(volume.id, node);
}

Expected<StringMap> IscsiProvider::publish_secrets(const VolumeRecord& volume,
                                                   const NodeRecord& node) {
  auto exports = this->exports();
  if (!exports) return exports.status();
  return (*exports)->secrets_of(volume.id, node);
}

Status IscsiProvider::reconcile_controller() {
  if (!exports_) return Status::ok();  // no target daemon here to restore
  // Watching first: a tgtd that is down now gets its targets once it answers.
  if (!watcher_) {
    watcher_ =
        std::make_unique<TargetWatcher>([this] { exports_->check_targets(); }, kWatchInterval);
  }
  auto restored = exports_->restore();
  if (!restored) return restored.status();
  for (const std::string& line : *restored)
    spdlog::info("iscsi: {}", escape_text(line));
  return Status::ok();
}

// ---------------------------------------------------------------- node side

Status IscsiProvider::check_volume_on_node(std::string_view volume_id) const {
  // Any node can reach an iSCSI volume once it is mapped to it; the login says otherwise.
  if (volume_id.starts_with("iscsi-")) return Status::ok();
  return error(Code::kNotFound, "volume \"{}\" is not an iscsi volume", volume_id);
}

Status IscsiProvider::stage_volume(const StageSpec& spec) {
  return node_.stage(spec);
}

Status IscsiProvider::unstage_volume(std::string_view volume_id, const std::string& staging_path) {
  auto stagings = store_.stagings(volume_id);
  if (!stagings) return stagings.status();
  bool last = true;
  for (const Staging& staging : *stagings) {
    if (staging.staging_path != staging_path) last = false;
  }
  return node_.unstage(volume_id, staging_path, last);
}

Status IscsiProvider::publish_volume(const PublishSpec& spec) {
  if (spec.capability.access_type != AccessType::kBlock) return NodeSide::publish_volume(spec);
  if (spec.readonly) {
    // A read-only bind of a device node still lets a writer open the device for writing, and
    // setting the disk itself read-only would take every other publication with it.
    return error(Code::kInvalidArgument,
                 "volume \"{}\": an iscsi block volume cannot be published read-only on a node",
                 spec.volume_id);
  }
  return bind_mount(fmt::format("{}/{}", spec.staging_path, kStagedDeviceNode), spec.target_path,
                    MountOptions{}, spec.before_attach);
}

Expected<int64_t> IscsiProvider::expand_on_node(const NodeExpandSpec& spec) {
  struct stat st;
  bool block = ::stat(spec.volume_path.c_str(), &st) == 0 && S_ISBLK(st.st_mode);
  return node_.expand(spec, block);
}

VolumeCondition IscsiProvider::node_condition(std::string_view volume_id) const {
  return node_.condition(volume_id);
}

std::vector<DoctorRow> IscsiProvider::doctor_rows() const {
  return {{kSessionsRow, "every session to our targets has a staging"}};
}

std::vector<HostFinding> IscsiProvider::inspect_host() {
  if (!settings_.node_role) return {};
  auto stagings = store_.all_stagings();
  if (!stagings) return {{kSessionsRow, true, std::string(stagings.status().message())}};
  std::vector<std::string> staged;
  for (const Staging& staging : *stagings)
    staged.push_back(staging.volume_id);
  auto sessions = node_.unstaged_sessions(staged, settings_.iqn_prefix);
  if (!sessions) return {{kSessionsRow, true, std::string(sessions.status().message())}};
  std::vector<HostFinding> found;
  for (const KernelSession& session : *sessions) {
    found.push_back({kSessionsRow, true,
                     fmt::format("a session to {} at {} has no staging here; `rosetctl doctor "
                                 "--fix` logs out of it",
                                 session.target, session.portal)});
  }
  return found;
}

Status IscsiProvider::reconcile_node(const VolumeLocker&) {
  auto stagings = store_.all_stagings();
  if (!stagings) return stagings.status();
  std::vector<std::string> staged;
  for (const Staging& staging : *stagings) {
    if (staging.volume_id.starts_with("iscsi-")) staged.push_back(staging.volume_id);
  }
  // Nothing to repair where open-iscsi is absent and nothing is staged.
  if (staged.empty() && !node_.check_installed()) return Status::ok();
  auto repaired = node_.repair(staged, settings_.iqn_prefix);
  if (!repaired) return repaired.status();
  for (const std::string& line : *repaired)
    spdlog::info("iscsi: {}", escape_text(line));
  return Status::ok();
}

}  // namespace rosetctl::iscsi
