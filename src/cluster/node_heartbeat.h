// How a node keeps its entry in the controller's registry fresh: `serve --role node
// --controller HOST:PORT` registers itself (its node id, the address it listens on, its iSCSI
// initiator name, topology and version) at start and again every kHeartbeatInterval, over
// mutual TLS with its own certificate, so `rosetctl node list` on the controller shows when it
// was last seen and where to reach it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "rosetctl.grpc.pb.h"

namespace rosetctl {

inline constexpr auto kHeartbeatInterval = std::chrono::seconds(30);

class NodeHeartbeat {
 public:
  NodeHeartbeat(std::shared_ptr<grpc::Channel> controller, std::string controller_address,
                v1::RegisterNodeRequest registration);
  // Stops the thread (it may be waiting for an answer for up to its deadline).
  ~NodeHeartbeat();
  NodeHeartbeat(const NodeHeartbeat&) = delete;
  NodeHeartbeat& operator=(const NodeHeartbeat&) = delete;

 private:
  void run();
  grpc::Status beat();  // one registration

  std::unique_ptr<v1::Registry::Stub> stub_;
  std::string controller_address_;
  v1::RegisterNodeRequest registration_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace rosetctl
