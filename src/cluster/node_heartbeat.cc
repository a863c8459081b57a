// The heartbeat thread: RegisterNode now and every interval; a change between working and
// failing is logged once, not every beat.
#include "cluster/node_heartbeat.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "core/validate.h"

namespace rosetctl {

NodeHeartbeat::NodeHeartbeat(std::shared_ptr<grpc::Channel> controller,
                             std::string controller_address, v1::RegisterNodeRequest registration)
    : stub_(v1::Registry::NewStub(std::move(controller))),
      controller_address_(std::move(controller_address)),
      registration_(std::move(registration)),
      thread_([this] { run(); }) {}

NodeHeartbeat::~NodeHeartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

grpc::Status NodeHeartbeat::beat() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::RegisterNodeResponse response;
  return stub_->RegisterNode(&context, registration_, &response);
}

void NodeHeartbeat::run() {
  std::optional<bool> working;  // unknown before the first beat
  while (true) {
    grpc::Status status = beat();
    bool worked = status.ok();
    if (worked && working != true) {
      spdlog::info("registered node \"{}\" with controller {} (again every {} s)",
                   registration_.node_id(), display_quoted(controller_address_),
                   kHeartbeatInterval.count());
    } else if (!worked && working != false) {
      spdlog::warn("cannot register node \"{}\" with controller {}: {}; trying again every 5 s",
                   registration_.node_id(), display_quoted(controller_address_),
                   escape_text(status.error_message()));
    }
    working = worked;
    std::unique_lock<std::mutex> lock(mutex_);
    // Failing: try again sooner, so a restarted controller learns of the node quickly.
    auto pause = worked ? kHeartbeatInterval : std::chrono::seconds(5);
    if (wake_.wait_for(lock, pause, [this] { return stopping_; })) return;
  }
}

}  // namespace rosetctl
