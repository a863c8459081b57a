// This host's name and network addresses: what a certificate for a server on this host names
// so that clients can reach it by any of them (rosetctl tls init).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace rosetctl {

Expected<std::string> host_name();

// Every address of every interface except loopback and IPv6 link-local ones, as canonical text,
// without repeats. Link-local addresses are left out: they mean nothing without an interface
// zone, which a certificate cannot carry.
Expected<std::vector<std::string>> host_addresses();

}  // namespace rosetctl
