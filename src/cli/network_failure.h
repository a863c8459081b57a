// What an UNAVAILABLE from a remote controller means, in words an operator can act on: a TLS
// refusal (wrong CA, expired or foreign certificate: PERMISSION_DENIED, exit 7, which no retry
// fixes) or an unreachable address (refused, timed out, no route: UNAVAILABLE, exit 6).
#pragma once

#include <string_view>

#include "core/status.h"

namespace rosetctl::cli {

// `closed_before`: how many attempts in a row the controller closed the connection at once. With
// TLS 1.3 a server that refuses the client's certificate says so after the client thinks the
// handshake is done, and the client sees only a closed socket; a controller that keeps doing
// that refuses this host's certificate, which no retry fixes.
Status network_failure(std::string_view address, const Status& unavailable, int closed_before);

// Whether the controller closed the connection as soon as it was made.
bool closed_at_once(const Status& unavailable);

}  // namespace rosetctl::cli
