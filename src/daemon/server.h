// `rosetctl serve`: the plugin on a unix socket until SIGTERM/SIGINT.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/plugin.h"

namespace rosetctl {

// "unix:///run/rosetctl/csi.sock", "unix:/path" or a bare absolute path → the socket path.
// TCP endpoints belong to --listen (always mutual TLS), not to the CSI endpoint.
Expected<std::string> parse_unix_endpoint(std::string_view endpoint);

// A TCP listen or dial address, "HOST:PORT" or "[IPV6]:PORT" (HOST an address or a name; PORT
// 0-65535, 0 only when `port_zero_ok`: pick a free one). INVALID_ARGUMENT naming `flag`.
Status check_tcp_address(std::string_view address, std::string_view flag, bool port_zero_ok);

// Makes `path` free for a new listener: a stale socket (nobody accepting) is removed; a live
// one or a non-socket file is an error, never deleted. Creates the parent directory.
Status prepare_socket_path(const std::string& path);

// Serves until SIGTERM or SIGINT, then lets in-flight calls finish (up to `grace`) and removes
// the socket. The socket file is mode 0660. Also listens on each of `tcp` with mutual TLS,
// whose files SIGHUP reloads (Plugin::reload_tls).
Status serve_until_signalled(Plugin& plugin, const std::string& socket_path,
                             const std::vector<std::string>& tcp, const TlsFiles& tls,
                             std::chrono::milliseconds grace);

}  // namespace rosetctl
