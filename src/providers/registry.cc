// Registration of the providers compiled into rosetctl.
#include "providers/registry.h"

#include <fmt/ranges.h>

#include "core/validate.h"
#include "providers/iscsi/iscsi_registration.h"
#include "providers/local/local_registration.h"
#include "providers/roset/roset_registration.h"

namespace rosetctl {

// The one place that lists providers: adding one is its folder, its include above and its line
// here. An explicit table rather than static self-registration because the providers are a
// static library: the linker drops object files nothing refers to, so a registration object
// would silently vanish from the binary, and the order of static initialisers (which sets the
// order of --help and Probe) is unspecified.
const std::vector<ProviderRegistration>& registered_providers() {
  static const std::vector<ProviderRegistration> providers = {
      local_registration(),
      roset_registration(),
      iscsi_registration(),
  };
  return providers;
}

const ProviderRegistration* find_registration(std::string_view name,
                                              const std::vector<ProviderRegistration>& providers) {
  for (const ProviderRegistration& registration : providers)
    if (registration.name == name) return &registration;
  return nullptr;
}

Expected<std::unique_ptr<ProviderRegistry>> ProviderRegistry::create(
    const StateLayout& layout, StateStore& store, const Settings& settings,
    const std::vector<ProviderRegistration>& registrations) {
  auto registry = std::make_unique<ProviderRegistry>();
  for (const ProviderRegistration& registration : registrations) {
    ProviderSettings own;
    for (const ProviderOption& option : registration.options)
      own[option.name.empty() ? option.env : option.name] = option.default_value;
    if (auto given = settings.by_provider.find(registration.name);
        given != settings.by_provider.end()) {
      for (const auto& [key, value] : given->second)
        own[key] = value;
    }
    ProviderContext context{.layout = layout,
                            .store = store,
                            .settings = own,
                            .capacity_overcommit = settings.capacity_overcommit,
                            .is_default = settings.default_provider == registration.name,
                            .node_role = settings.node_role,
                            .controller_role = settings.controller_role};
    auto provider = registration.create(context);
    if (!provider) return provider.status();
    registry->providers_.push_back(std::move(*provider));
  }

  auto chosen = registry->by_name(settings.default_provider);
  if (!chosen) return chosen.status();
  registry->default_ = *chosen;
  return registry;
}

Expected<Provider*> ProviderRegistry::by_name(std::string_view name) const {
  for (const auto& provider : providers_) {
    if (provider->name() == name) return provider.get();
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

Expected<NodeSide*> ProviderRegistry::node_for_volume(std::string_view volume_id) const {
  auto provider = for_volume(volume_id);
  if (!provider) return provider.status();
  return node_side(**provider);
}

std::vector<std::string> ProviderRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& provider : providers_)
    out.emplace_back(provider->name());
  return out;
}

}  // namespace rosetctl
