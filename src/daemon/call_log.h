// Every RPC handler runs through run_logged(): one info line per call (method, volume, duration,
// status), its count and latency for the metrics endpoint (daemon/metrics.h) and, at debug
// level, the request and response with csi_secret fields redacted.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <string_view>

#include "core/call_scope.h"
#include "core/full_filesystem.h"
#include "core/status.h"
#include "daemon/call_gate.h"
#include "daemon/grpc_status.h"
#include "daemon/handler_pool.h"
#include "daemon/metrics.h"
#include "daemon/request_limits.h"

namespace rosetctl {

void log_call_start(std::string_view method, const google::protobuf::Message& request);
void log_call_end(std::string_view method, const CallAdmission& caller,
                  const google::protobuf::Message& request,
                  const google::protobuf::Message& response, const Status& status,
                  std::chrono::steady_clock::duration elapsed);

// `handler` returns Status and fills `response`. It runs only when the caller may make the
// call (call_gate.h) and the request is within daemon/request_limits.h's bounds;
// a refusal is logged like any other answer. It works for the call (core/call_scope.h): its
// long loops and lock waits stop when the call's deadline passes or its client cancels, with
// DEADLINE_EXCEEDED or CANCELLED.
template <typename Handler>
grpc::Status run_logged(grpc::ServerContextBase& call, std::string_view method,
                        const google::protobuf::Message& request,
                        google::protobuf::Message* response, Handler&& handler) {
  auto start = std::chrono::steady_clock::now();
  log_call_start(method, request);
  // call_gate.h: decided before we ran, with the caller it was decided for.
  CallAdmission admitted = admission_of(call);
  Status status = admitted.status;
  CallLimits limits(call.deadline(), [&call] { return call.IsCancelled(); });
  CurrentCall working_for(&limits);
  auto carried = carried_by(call);                    // for the transfers the handler starts
  if (status.is_ok()) status = check_current_call();  // it may have waited for a thread
  if (status.is_ok()) status = check_map_sizes(request);
  if (status.is_ok()) status = handler();
  // A full disk is named where it happened: the filesystem holding the state directory.
  status = name_full_filesystem(std::move(status), process_state_directory());
  if (!status.is_ok()) {
    response->Clear();
    mark_answered(call);
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  log_call_end(method, admitted, request, *response, status, elapsed);
  record_call(method, status.code(), elapsed);
  return to_grpc(status);
}

// Answers a call of gRPC's callback API: `handler` runs on `pool` (it may block), and the call
// finishes with its status. `handler` must own or point at what it uses: this returns first.
template <typename Handler>
grpc::ServerUnaryReactor* answer(HandlerPool& pool, grpc::CallbackServerContext* call,
                                 std::string_view method, const google::protobuf::Message* request,
                                 google::protobuf::Message* response, Handler handler) {
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  pool.run([=, handler = std::move(handler)]() mutable {
    reactor->Finish(run_logged(*call, method, *request, response, handler));
  });
  return reactor;
}

// The same for a handler that never blocks (it only reads options): run on gRPC's thread.
template <typename Handler>
grpc::ServerUnaryReactor* answer_now(grpc::CallbackServerContext* call, std::string_view method,
                                     const google::protobuf::Message* request,
                                     google::protobuf::Message* response, Handler&& handler) {
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  reactor->Finish(run_logged(*call, method, *request, response, std::forward<Handler>(handler)));
  return reactor;
}

}  // namespace rosetctl
