// The local provider: this host's storage (providers/common/local_storage.h) with its default
// flavor, directories and images under the state dir. It needs only the settings every provider
// shares.
#include "providers/local/local_registration.h"

#include "providers/common/local_storage.h"

namespace rosetctl {

ProviderRegistration local_registration() {
  return {.name = "local",
          .option_group = "",
          .options = {},
          .create = [](const ProviderContext& context) -> Expected<std::unique_ptr<Provider>> {
            return std::unique_ptr<Provider>(std::make_unique<LocalStorage>(
                context.layout, context.store, context.capacity_overcommit));
          }};
}

}  // namespace rosetctl
