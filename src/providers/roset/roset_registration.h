// The roset provider's entry in the registry: its settings and its factory.
#pragma once

#include "providers/provider_registration.h"

namespace rosetctl {

ProviderRegistration roset_registration();

}  // namespace rosetctl
