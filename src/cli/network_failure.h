// What an UNAVAILABLE from a remote controller means, in words an operator can act on: a TLS
// refusal (wrong CA, expired or foreign certificate: PERMISSION_DENIED, exit 7, which no retry
// fixes) or an unreachable address (refused, timed out, no route: UNAVAILABLE, exit 6).
#pragma once

#include <string_view>

#include "core/status.h"

namespace rosetctl::cli {

Status network_failure(std::string_view address, const Status& unavailable);

}  // namespace rosetctl::cli
