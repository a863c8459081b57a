// Volumes kept on this host, under the state dir: the whole of the local provider
// (providers/local/) and the image volumes the iscsi provider exports (providers/iscsi/), which
// both build on this class, each with its StorageFlavor. A volume is either a directory under
// the state dir (type dir: emptyDir semantics, seed 000, created on first stage, bind-mounted at
// the staging path; its size is recorded, not enforced) or a sparse image file on a loop device
// (type image: a filesystem of exactly the requested size, or a raw block device; see
// image_volume.h and image_node.h). Snapshots of both are commits in a content-addressed store
// under the state dir: a directory's files (storage_snapshots.cc), or an image as one file
// (image_snapshots.cc).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "core/commit_store/commit_store.h"
#include "core/state_layout.h"
#include "core/state_store.h"
#include "providers/common/image_node.h"
#include "providers/common/image_volume.h"
#include "providers/provider.h"

namespace rosetctl {

// What distinguishes the providers built on this storage (local; iscsi: images exported by a
// target daemon): the name (the volume id prefix), the images' directory under the state dir,
// and whether directory volumes are refused.
struct StorageFlavor {
  std::string name = "local";
  std::string images_dir = "images";
  bool images_only = false;
};

// One object implements every part (the parts share its state and locks).
class LocalStorage final : public Provider,
                           public ControllerSide,
                           public SnapshotSide,
                           public NodeSide {
 public:
  // `capacity_overcommit`: image volumes may promise more space than the disk has free (see
  // ImageFiles for the policy).
  LocalStorage(StateLayout layout, StateStore& store, bool capacity_overcommit,
               StorageFlavor flavor = {});

  std::string_view name() const override { return flavor_.name; }
  // The image file of an image volume.
  std::string image_path(std::string_view volume_id) const { return images_.image(volume_id); }
  bool volumes_are_node_local() const override { return true; }
  Status check_health() const override;
  bool health_check_may_block() const override { return false; }  // one access(2)
  std::vector<ProviderGauge> gauges() override;
  std::vector<HostFinding> inspect_host() override;
  std::vector<DoctorRow> doctor_rows() const override;
  ControllerSide* controller() override { return this; }
  SnapshotSide* snapshots() override { return this; }
  NodeSide* node() override { return this; }

  Status validate_create(const CreateVolumeSpec& spec) const override;
  Status validate_mutable(const CreateVolumeSpec& spec) const override;
  Status check_mutable(const VolumeRecord& volume, const StringMap& parameters) const override;
  Status modify_volume(const VolumeRecord& volume, const StringMap& changes) override;
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

  Expected<ProvisionedSnapshot> create_snapshot(const SnapshotSpec& spec,
                                                const RecordSnapshot& record) override;
  Status delete_snapshot(const SnapshotRecord& snapshot) override;
  Expected<std::vector<TreeChange>> diff_snapshots(const SnapshotRecord& from,
                                                   const SnapshotRecord& to) override;
  Expected<SnapshotVerification> verify_snapshots(const std::vector<SnapshotRecord>& snapshots,
                                                  ProgressSink* progress) override;
  Expected<StorageCollection> collect_garbage(std::chrono::milliseconds patience) override;
  Status prepare_restore(std::string_view commit_id, bool from_another_host) override;

  Status check_volume_on_node(std::string_view volume_id) const override;
  Status check_volume_on_node_given(std::string_view volume_id,
                                    const VolumeRecord* here) const override;
  Status stage_volume(const StageSpec& spec) override;
  Status unstage_volume(std::string_view volume_id, const std::string& staging_path) override;
  Status publish_volume(const PublishSpec& spec) override;
  Expected<int64_t> expand_on_node(const NodeExpandSpec& spec) override;
  VolumeCondition node_condition(std::string_view volume_id) const override;
  Status reconcile_node(const VolumeLocker& lock) override;

 private:
  std::string data_dir(std::string_view volume_id) const;
  Expected<VolumeRecord> load(std::string_view volume_id) const;
  Status delete_directory_volume(const VolumeRecord& volume);
  Status delete_image_volume(const VolumeRecord& volume);
  // Creates the data directory (mode 0777) unless it exists.
  Status ensure_data_dir(std::string_view volume_id) const;

  // How long a commit or restore waits for a running garbage collection.
  static constexpr std::chrono::seconds kStorePatience{60};

  // storage_snapshots.cc
  Expected<const CommitStore*> commit_store() const;
  // Fills the new volume's data directory from spec.source before the volume is recorded.
  Status populate_volume(std::string_view volume_id, const CreateVolumeSpec& spec);
  Status forget_volume(std::string_view volume_id);
  Status remove_unrecorded_commits(const CommitStore& store, StorageCollection& collection);
  void remove_leftovers(const CommitStore& store);

  // image_snapshots.cc
  Expected<ProvisionedSnapshot> create_image_snapshot(const SnapshotSpec& spec,
                                                      const VolumeRecord& volume,
                                                      const RecordSnapshot& record);
  // A new volume (directory or image, as its source is) filled from spec.source.
  Expected<ProvisionedVolume> create_from_source(std::string volume_id,
                                                 const CreateVolumeSpec& spec);
  // Records the new image volume's mutable parameters; with directIO=true, removes the image and
  // fails where its filesystem cannot do direct I/O through a loop device (for a restore or
  // clone: only where it never can).
  Status set_image_mutable_parameters(ProvisionedVolume& volume, const CreateVolumeSpec& spec);
  Status restore_image_snapshot(std::string_view volume_id, const CreateVolumeSpec& spec,
                                int64_t bytes, bool filesystem_follows);
  Status clone_image(std::string_view volume_id, const VolumeRecord& source,
                     const CreateVolumeSpec& spec, int64_t bytes);

  StateLayout layout_;
  StorageFlavor flavor_;
  StateStore& store_;
  ImageFiles images_;
  ImageNode image_node_;

  mutable std::mutex commit_store_mutex_;
  mutable std::unique_ptr<CommitStore> commit_store_;  // opened on first use; guarded by the mutex
};

}  // namespace rosetctl
