// Status -> grpc::Status at the edge of the gRPC layer (the codes share their numbers).
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "core/status.h"

namespace rosetctl {

inline grpc::Status to_grpc(const Status& status) {
  if (status.is_ok()) return grpc::Status::OK;
  return {static_cast<grpc::StatusCode>(status.code()), status.message()};
}

inline Status from_grpc(const grpc::Status& status) {
  if (status.ok()) return Status::ok();
  return {static_cast<Code>(status.error_code()), status.error_message()};
}

// A failure rosetctl's handler answered, as opposed to one gRPC made up for a call that never
// reached it (a connection refused, a server shutting down): clients retry only the latter. It
// travels as trailing metadata, which only an answering server sends.
inline constexpr const char* kAnsweredKey = "rosetctl-answered";
inline void mark_answered(grpc::ServerContextBase& call) {
  call.AddTrailingMetadata(kAnsweredKey, "1");
}
inline bool was_answered(const grpc::ClientContext& context) {
  return context.GetServerTrailingMetadata().count(kAnsweredKey) > 0;
}

}  // namespace rosetctl
