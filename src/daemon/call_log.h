// Every RPC handler runs through run_logged(): one info line per call (method, volume, duration,
// status) and, at debug level, the request and response with csi_secret fields redacted.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <string_view>

#include "core/status.h"
#include "daemon/grpc_status.h"

namespace rosetctl {

void log_call_start(std::string_view method, const google::protobuf::Message& request);
void log_call_end(std::string_view method, const google::protobuf::Message& request,
                  const google::protobuf::Message& response, const Status& status,
                  std::chrono::steady_clock::duration elapsed);

// `handler` returns Status and fills `response`.
template <typename Handler>
grpc::Status run_logged(std::string_view method, const google::protobuf::Message& request,
                        google::protobuf::Message* response, Handler&& handler) {
  auto start = std::chrono::steady_clock::now();
  log_call_start(method, request);
  Status status = handler();
  if (!status.is_ok()) response->Clear();
  log_call_end(method, request, *response, status, std::chrono::steady_clock::now() - start);
  return to_grpc(status);
}

}  // namespace rosetctl
