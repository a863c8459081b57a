// The local provider needs only the settings every provider shares.
#include "providers/local/local_registration.h"

#include "providers/local/local_provider.h"

namespace rosetctl {

ProviderRegistration local_registration() {
  return {.name = "local",
          .option_group = "",
          .options = {},
          .create = [](const ProviderContext& context) -> Expected<std::unique_ptr<Provider>> {
            return std::unique_ptr<Provider>(std::make_unique<LocalProvider>(
                context.layout, context.store, context.capacity_overcommit));
          }};
}

}  // namespace rosetctl
