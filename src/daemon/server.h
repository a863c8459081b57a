// What `rosetctl serve` needs of this host to listen: the CSI endpoint's and the listeners'
// addresses, the socket file, the signals it stops on. The loop that serves the assembled
// plugin until then is cluster/serve.h.
#pragma once

#include <signal.h>

#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

// "unix:///run/rosetctl/csi.sock", "unix:/path" or a bare absolute path → the socket path.
// TCP endpoints belong to --listen (always mutual TLS), not to the CSI endpoint.
Expected<std::string> parse_unix_endpoint(std::string_view endpoint);

// A TCP listen or dial address, "HOST:PORT" or "[IPV6]:PORT" (HOST an address or a name; PORT
// 0-65535, 0 only when `port_zero_ok`: pick a free one). INVALID_ARGUMENT naming `flag`.
Status check_tcp_address(std::string_view address, std::string_view flag, bool port_zero_ok);

// Whether a socket already listens on `address` (as check_tcp_address takes it; a name is
// resolved, every address of it checked): a bind without SO_REUSEPORT there fails with
// EADDRINUSE. SO_REUSEADDR lets it pass connections in TIME_WAIT, left by a serve that just
// stopped. False for port 0, and for an address that does not resolve or is not this host's
// (the listener's own bind judges those).
bool tcp_address_taken(const std::string& address);

// Makes `path` free for a new listener: a stale socket (nobody accepting) is removed; a live
// one or a non-socket file is an error, never deleted. Creates the parent directory.
Status prepare_socket_path(const std::string& path);

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, so that every thread made after it
// (gRPC's, the heartbeat's, a certificate renewal's) inherits the mask and only
// serve_until_signalled's wait ever takes them. Called first thing by `serve`: a thread made
// before it would take a SIGTERM by its default action and end serve without its grace.
void block_stop_signals();
// The signals blocked: SIGTERM, SIGINT (stop) and SIGHUP (reload the TLS files now).
sigset_t stop_signals();

}  // namespace rosetctl
