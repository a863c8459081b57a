// `rosetctl serve`'s loop: the assembled plugin (plugin.h) on its unix socket and TCP listeners
// until SIGTERM or SIGINT; SIGHUP reloads the TLS files (daemon/server.h prepares the socket
// and blocks the signals).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cluster/plugin.h"
#include "cluster/tls_files.h"

namespace rosetctl {

// Serves until SIGTERM or SIGINT, then lets in-flight calls finish (up to `grace`) and removes
// the socket. The socket file is mode 0660. Also listens on each of `tcp` with mutual TLS,
// whose files SIGHUP reloads (Plugin::reload_tls).
Status serve_until_signalled(Plugin& plugin, const std::string& socket_path,
                             const std::vector<std::string>& tcp, const TlsFiles& tls,
                             std::chrono::milliseconds grace);

}  // namespace rosetctl
