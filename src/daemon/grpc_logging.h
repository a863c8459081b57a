// gRPC's own log lines (a failed TLS handshake, a port that cannot be bound) go through our
// logger: one escaped line each, in the same format as every other line, instead of gRPC's
// format on stderr beside ours.
#pragma once

namespace rosetctl {

// Idempotent; call before gRPC starts its threads. A long-running server logs gRPC's errors (a
// client that failed its handshake) as warnings; a CLI run, which reports what failed in its own
// words, only with -v.
void route_grpc_logs(bool long_running);

}  // namespace rosetctl
