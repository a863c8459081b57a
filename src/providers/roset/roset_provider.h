// The roset provider: a volume is a folder in a Roset mount (roset-api.md), made through the
// REST API on the controller and reached on nodes through a shared roset-fuse process
// (shared_fuse_mounts.h). Ids are "roset-<node id>" (restored volumes "roset-restore-<hex>").
#pragma once

#include <memory>
#include <string>

#include "core/state_layout.h"
#include "core/state_store.h"
#include "providers/provider.h"
#include "providers/roset/http_client.h"
#include "providers/roset/roset_config.h"
#include "providers/roset/shared_fuse_mounts.h"
#include "providers/volume_context.h"

namespace rosetctl {

// One object implements every part (the parts share its state and locks).
class RosetProvider final : public Provider,
                            public ControllerSide,
                            public SnapshotSide,
                            public NodeSide {
 public:
  RosetProvider(RosetConfig config, const StateLayout& layout, StateStore& store);

  std::string_view name() const override { return "roset"; }
  bool volumes_are_node_local() const override { return false; }
  // Publishing records the mapping (for --max-volumes-per-node and `volume show`); nodes mount
  // the folders with their own roset-fuse and key, nothing of a node's record is used.
  bool publish_needs_registered_node() const override { return false; }
  Status check_health() const override;
  // Configured, the check asks the Roset API.
  bool health_check_may_block() const override { return configured(); }
  std::vector<ProviderGauge> gauges() override;
  std::vector<HostFinding> inspect_host() override;
  std::vector<DoctorRow> doctor_rows() const override;
  ControllerSide* controller() override { return this; }
  SnapshotSide* snapshots() override { return this; }
  NodeSide* node() override { return this; }

  Status validate_create(const CreateVolumeSpec& spec) const override;
  Expected<ProvisionedVolume> create_volume(const CreateVolumeSpec& spec) override;
  Status delete_volume(const VolumeRecord& volume) override;
  Status delete_volume_with(const VolumeRecord& volume, const StringMap& secrets) override;
  Expected<int64_t> available_capacity() const override;
  VolumeCondition volume_condition(const VolumeRecord& volume) const override;

  // Snapshots are Roset commits (roset_snapshots.cc): ids "roset-<commit id>", each pinned by
  // the ref "rosetctl/<snapshot name>"; deleting a snapshot drops the pin, as the API has no
  // way to delete a commit.
  Expected<ProvisionedSnapshot> create_snapshot(const SnapshotSpec& spec,
                                                const RecordSnapshot& record) override;
  Status delete_snapshot(const SnapshotRecord& snapshot) override;
  Status delete_snapshot_with(const SnapshotRecord& snapshot, const StringMap& secrets,
                              const ForgetSnapshot& forget) override;
  // A commit per snapshot, asked of the API; Roset verifies the data itself.
  Expected<SnapshotVerification> verify_snapshots(const std::vector<SnapshotRecord>& snapshots,
                                                  ProgressSink* progress) override;

  Status check_volume_on_node(std::string_view volume_id) const override;
  Status stage_volume(const StageSpec& spec) override;
  Status unstage_volume(std::string_view volume_id, const std::string& staging_path) override;
  Status publish_volume(const PublishSpec& spec) override;
  VolumeCondition node_condition(std::string_view volume_id) const override;
  Status reconcile_node(const VolumeLocker& lock) override;
  Status revive_staging(std::string_view volume_id, const std::string& staging_path) override;

 private:
  // True when this host uses Roset at all (default provider, or a key configured); Probe
  // checks nothing for a provider nobody configured.
  bool configured() const;
  Expected<RosetEndpoint> endpoint_for(const StringMap& context, const StringMap& secrets,
                                       KeyUse use = KeyUse::kApi) const;
  Status drop_snapshot_pin(const SnapshotRecord& snapshot, const StringMap& secrets);
  Status make_base_path(class RosetApi& api, const std::string& base_path);
  Status check_no_restores_of(const VolumeRecord& volume);
  // A read-only volume showing the folder a commit was taken of, pinned by its own ref.
  Expected<ProvisionedVolume> create_restored_volume(const CreateVolumeSpec& spec);

  RosetConfig config_;
  StateStore& store_;
  std::unique_ptr<HttpClient> http_;
  SharedFuseMounts fuse_;
};

}  // namespace rosetctl
