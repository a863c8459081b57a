// The embedded default provider: a volume is a directory under the state dir (emptyDir
// semantics, seed 000), created on first stage, bind-mounted at the staging path.
#pragma once

#include <string>

#include "core/state_layout.h"
#include "core/state_store.h"
#include "providers/provider.h"

namespace rosetctl {

class LocalProvider final : public Provider {
 public:
  LocalProvider(StateLayout layout, StateStore& store)
      : layout_(std::move(layout)), store_(store) {}

  std::string_view name() const override { return "local"; }
  bool volumes_are_node_local() const override { return true; }
  Status check_health() const override;

  Status validate_create(const CreateVolumeSpec& spec) const override;
  Expected<ProvisionedVolume> create_volume(const CreateVolumeSpec& spec) override;
  Status delete_volume(const VolumeRecord& volume) override;
  Expected<int64_t> available_capacity() const override;
  VolumeCondition volume_condition(const VolumeRecord& volume) const override;

  Status check_volume_on_node(std::string_view volume_id) const override;
  Status stage_volume(const StageSpec& spec) override;
  Status unstage_volume(std::string_view volume_id, const std::string& staging_path) override;

 private:
  std::string data_dir(std::string_view volume_id) const;

  StateLayout layout_;
  StateStore& store_;
};

}  // namespace rosetctl
