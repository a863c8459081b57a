// Status -> grpc::Status at the edge of the gRPC layer (the codes share their numbers).
#pragma once

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

}  // namespace rosetctl
