// `rosetctl serve`: the plugin on a unix socket until SIGTERM/SIGINT.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "daemon/plugin.h"

namespace rosetctl {

// "unix:///run/rosetctl/csi.sock", "unix:/path" or a bare absolute path → the socket path.
// TCP endpoints are refused until TLS support lands.
Expected<std::string> parse_unix_endpoint(std::string_view endpoint);

// Makes `path` free for a new listener: a stale socket (nobody accepting) is removed; a live
// one or a non-socket file is an error, never deleted. Creates the parent directory.
Status prepare_socket_path(const std::string& path);

// Serves until SIGTERM or SIGINT, then lets in-flight calls finish (up to `grace`) and removes
// the socket. The socket file is mode 0660.
Status serve_until_signalled(Plugin& plugin, const std::string& socket_path,
                             std::chrono::milliseconds grace);

}  // namespace rosetctl
