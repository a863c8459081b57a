// Registration of the providers compiled into rosetctl.
#include "providers/registry.h"

#include <fmt/ranges.h>

#include "core/validate.h"
#include "providers/local/local_provider.h"
#include "providers/roset/roset_provider.h"

namespace rosetctl {

Expected<std::unique_ptr<ProviderRegistry>> ProviderRegistry::create(
    const StateLayout& layout, StateStore& store, std::string_view default_provider,
    bool capacity_overcommit, RosetConfig roset) {
  auto registry = std::make_unique<ProviderRegistry>();
  registry->providers_.push_back(
      std::make_unique<LocalProvider>(layout, store, capacity_overcommit));
  roset.is_default_provider = default_provider == "roset";
  registry->providers_.push_back(std::make_unique<RosetProvider>(std::move(roset), layout, store));

  auto chosen = registry->by_name(default_provider);
  if (!chosen) return chosen.status();
  registry->default_ = *chosen;
  return registry;
}

Expected<Provider*> ProviderRegistry::by_name(std::string_view name) const {
  for (const auto& provider : providers_) {
    if (provider->name() == name) return provider.get();
  }
  if (name == "iscsi") {
    return error(Code::kInvalidArgument, "provider \"{}\" is not available yet in this build",
                 name);
  }
  return error(Code::kInvalidArgument, "unknown provider {} (available: {})", display_quoted(name),
               fmt::join(names(), ", "));
}

Expected<Provider*> ProviderRegistry::for_volume(std::string_view volume_id) const {
  for (const auto& provider : providers_) {
    std::string_view prefix = provider->name();
    if (volume_id.size() > prefix.size() && volume_id.starts_with(prefix) &&
        volume_id[prefix.size()] == '-') {
      return provider.get();
    }
  }
  return error(Code::kNotFound, "volume \"{}\" does not exist (no provider issues such ids)",
               volume_id);
}

std::vector<std::string> ProviderRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& provider : providers_)
    out.emplace_back(provider->name());
  return out;
}

}  // namespace rosetctl
