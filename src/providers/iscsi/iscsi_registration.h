// The iscsi provider's entry in the registry: its settings and factory.
#pragma once

#include "providers/provider_registration.h"

namespace rosetctl {

ProviderRegistration iscsi_registration();

}  // namespace rosetctl
