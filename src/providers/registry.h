// The providers this build knows, and which one owns a given volume id.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_layout.h"
#include "core/state_store.h"
#include "providers/provider.h"

namespace rosetctl {

class ProviderRegistry {
 public:
  // Builds every provider this binary has. `default_provider` serves CreateVolume calls that do
  // not name one; INVALID_ARGUMENT if it is unknown. `capacity_overcommit`: providers may
  // promise more space than they have (local image volumes).
  static Expected<std::unique_ptr<ProviderRegistry>> create(const StateLayout& layout,
                                                            StateStore& store,
                                                            std::string_view default_provider,
                                                            bool capacity_overcommit);

  Provider& default_provider() const { return *default_; }
  // By name ("local"), for CreateVolume's `provider` parameter.
  Expected<Provider*> by_name(std::string_view name) const;
  // By volume id: every id starts with "<provider>-". NOT_FOUND for ids no provider issued.
  Expected<Provider*> for_volume(std::string_view volume_id) const;
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<Provider>> providers_;
  Provider* default_ = nullptr;
};

}  // namespace rosetctl
