// The iscsi provider: block storage on the controller, attached by consumers over iSCSI.
//
// Controller side: a volume is an image file under <state>/iscsi-images, made, grown,
// snapshotted, restored and cloned by the image code the local provider uses too
// (providers/common/: a LocalStorage flavoured "iscsi"), and exported by a target daemon
// (TargetBackend: tgt) as LUN 1 of its own target; ControllerPublish lets the node's initiator
// (from the node registry) in, Unpublish takes it off the ACL (IscsiExports). Node side: open-iscsi
// logs in to the portal the publish context names and the disk is staged as a filesystem or a raw
// device (IscsiNode).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "providers/common/local_storage.h"
#include "providers/iscsi/iscsi_exports.h"
#include "providers/iscsi/iscsi_node.h"
#include "providers/iscsi/target_watcher.h"
#include "providers/provider.h"

namespace rosetctl::iscsi {

struct IscsiSettings {
  std::string portal;      // what consumers log in to; "" refuses publishing, naming the flag
  std::string iqn_prefix;  // targets are <prefix>:<volume id>
  bool controller_role = true;
  bool node_role = true;
  bool is_default = false;  // --provider iscsi: its health is the plugin's
};

class IscsiProvider final : public Provider, public ControllerSide, public NodeSide {
 public:
  // `backend`: null where this process has no controller side, or where the target daemon's
  // tools are missing (`backend_problem` says so, and every controller call answers with it).
  IscsiProvider(const StateLayout& layout, StateStore& store, bool capacity_overcommit,
                IscsiSettings settings, std::unique_ptr<TargetBackend> backend,
                Status backend_problem = Status::ok());

  std::string_view name() const override { return "iscsi"; }
  bool volumes_are_node_local() const override { return false; }
  Status check_health() const override;
  bool health_check_may_block() const override;
  std::vector<ProviderGauge> gauges() override;
  std::vector<HostFinding> inspect_host() override;
  std::vector<DoctorRow> doctor_rows() const override;
  ControllerSide* controller() override { return settings_.controller_role ? this : nullptr; }
  SnapshotSide* snapshots() override {
    return settings_.controller_role ? images_.snapshots() : nullptr;
  }
  NodeSide* node() override { return settings_.node_role ? this : nullptr; }

  // --- controller side: the image code, plus the target ---
  Status validate_create(const CreateVolumeSpec& spec) const override;
  Expected<ProvisionedVolume> create_volume(const CreateVolumeSpec& spec) override;
  Status delete_volume(const VolumeRecord& volume) override;
  Expected<int64_t> available_capacity() const override;
  VolumeCondition volume_condition(const VolumeRecord& volume) const override;
  std::string incompatibility(const VolumeRecord& existing,
                              const CreateVolumeSpec& spec) const override;
  std::string capability_mismatch(const VolumeRecord& volume,
                                  const Capability& capability) const override;
  Expected<ExpandedVolume> expand_volume(const VolumeRecord& volume, int64_t required_bytes,
                                         int64_t limit_bytes) override;
  Expected<StringMap> map_to_node(const VolumeRecord& volume, const NodeRecord& node,
                                  const StringMap& secrets) override;
  Status unmap_from_node(const VolumeRecord& volume, const NodeRecord& node) override;
  bool maps_use_node_record() const override { return true; }  // its initiator name goes on the ACL
  Expected<StringMap> publish_secrets(const VolumeRecord& volume, const NodeRecord& node) override;
  Status reconcile_controller() override;

  // --- node side: open-iscsi ---
  Status check_volume_on_node(std::string_view volume_id) const override;
  Status stage_volume(const StageSpec& spec) override;
  Status unstage_volume(std::string_view volume_id, const std::string& staging_path) override;
  // A block volume's device node is bound at the target; a mount volume's staging as usual.
  Status publish_volume(const PublishSpec& spec) override;
  Expected<int64_t> expand_on_node(const NodeExpandSpec& spec) override;
  VolumeCondition node_condition(std::string_view volume_id) const override;
  Status reconcile_node(const VolumeLocker& lock) override;

 private:
  // The spec as the image code sees it: type image, always.
  static CreateVolumeSpec as_image(const CreateVolumeSpec& spec);
  // Whether any volume of this provider is recorded (its health then matters).
  bool in_use() const;
  // The exports, or why there are none (the target daemon's tools are missing).
  Expected<IscsiExports*> exports() const;

  IscsiSettings settings_;
  StateStore& store_;
  LocalStorage images_;
  std::unique_ptr<IscsiExports> exports_;  // null without a controller side
  Status backend_problem_;
  IscsiNode node_;
  // Started by reconcile_controller (serve, doctor --fix); last, so it stops before the exports
  // it checks go.
  std::unique_ptr<TargetWatcher> watcher_;
};

}  // namespace rosetctl::iscsi
