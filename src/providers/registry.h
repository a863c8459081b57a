// The providers this build knows, and which one owns a given volume id.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_layout.h"
#include "core/state_store.h"
#include "providers/provider.h"
#include "providers/provider_registration.h"

namespace rosetctl {

class ProviderRegistry {
 public:
  // What every provider is built with (ProviderContext), and each one's own settings by
  // provider name; an option not given there takes its default.
  struct Settings {
    std::string default_provider = "local";  // serves CreateVolume calls that do not name one
    bool capacity_overcommit = false;
    bool node_role = true;
    bool controller_role = true;
    std::map<std::string, ProviderSettings> by_provider;
  };

  // Builds every registered provider (or those of `registrations`: a test's own provider).
  // INVALID_ARGUMENT if the default provider is unknown or a provider refuses its settings.
  static Expected<std::unique_ptr<ProviderRegistry>> create(
      const StateLayout& layout, StateStore& store, const Settings& settings,
      const std::vector<ProviderRegistration>& registrations = registered_providers());

  Provider& default_provider() const { return *default_; }
  // By name ("local"), for CreateVolume's `provider` parameter.
  Expected<Provider*> by_name(std::string_view name) const;
  // By volume id: every id starts with "<provider>-". NOT_FOUND for ids no provider issued.
  Expected<Provider*> for_volume(std::string_view volume_id) const;
  std::vector<std::string> names() const;
  // The node side of the owner of `volume_id`: for_volume's NOT_FOUND, or UNIMPLEMENTED when
  // the provider has no node side (providers/provider.h).
  Expected<NodeSide*> node_for_volume(std::string_view volume_id) const;

 private:
  std::vector<std::unique_ptr<Provider>> providers_;
  Provider* default_ = nullptr;
};

}  // namespace rosetctl
