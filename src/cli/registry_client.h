// The CLI's client of the controller's node registry (rosetctl.v1.Registry): typed calls with a
// deadline on whatever channel the session hands it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

#include "core/status.h"
#include "daemon/grpc_status.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl::cli {

class RegistryClient {
 public:
  // Registry calls are a few database rows; RemoveNode waits up to 10 s for publications.
  static constexpr std::chrono::system_clock::duration kCallDeadline = std::chrono::minutes(1);

  explicit RegistryClient(std::shared_ptr<grpc::Channel> channel)
      : stub_(v1::Registry::NewStub(channel)) {}

  template <typename Request, typename Response>
  using Method = grpc::Status (v1::Registry::Stub::*)(grpc::ClientContext*, const Request&,
                                                      Response*);

  template <typename Request, typename Response>
  Status call(Method<Request, Response> method, const Request& request, Response* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    return from_grpc((stub_.get()->*method)(&context, request, response));
  }

 private:
  std::unique_ptr<v1::Registry::Stub> stub_;
};

}  // namespace rosetctl::cli
