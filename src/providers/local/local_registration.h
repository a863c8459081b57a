// The local provider's entry in the registry: its factory (it has no settings of its own).
#pragma once

#include "providers/provider_registration.h"

namespace rosetctl {

ProviderRegistration local_registration();

}  // namespace rosetctl
