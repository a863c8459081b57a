// The CLI's side of "CSI is the internal API" (and of rosetctl.v1's Catalog, Registry and
// NodeState): typed calls on a channel, with deadlines, the
// run's CSI secrets on every request that carries secrets, and a patient retry when another
// operation on the same volume is in flight (ABORTED), announced once on stderr.
#pragma once

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/attach_turn.h"
#include "cli/network_failure.h"
#include "cluster/peer_authority.h"
#include "cluster/placed_id.h"
#include "core/status.h"
#include "csi.grpc.pb.h"
#include "daemon/grpc_status.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl::cli {

class CsiClient {
 public:
  static constexpr std::chrono::system_clock::duration kCallDeadline = std::chrono::minutes(10);
  // A commit or restore reads or writes a whole volume: hours for a large one.
  static constexpr std::chrono::system_clock::duration kDataCallDeadline = std::chrono::hours(24);

  // Every service on `local` (this host's plugin in this process)...
  explicit CsiClient(std::shared_ptr<grpc::Channel> local)
      : local_channel_(local),
        identity_(csi::v1::Identity::NewStub(local)),
        controller_(csi::v1::Controller::NewStub(local)),
        node_(csi::v1::Node::NewStub(local)),
        node_state_(v1::NodeState::NewStub(local)),
        catalog_(v1::Catalog::NewStub(local)),
        registry_(v1::Registry::NewStub(local)) {}
  // ...or the controller's on `controller`, a TLS channel to `controller_address`: the same
  // calls over another channel. Its calls that meet an unreachable controller are retried.
  CsiClient(std::shared_ptr<grpc::Channel> local, std::shared_ptr<grpc::Channel> controller,
            std::string controller_address)
      : local_channel_(local),
        identity_(csi::v1::Identity::NewStub(local)),
        controller_(csi::v1::Controller::NewStub(controller)),
        node_(csi::v1::Node::NewStub(local)),
        node_state_(v1::NodeState::NewStub(local)),
        catalog_(v1::Catalog::NewStub(controller)),
        registry_(v1::Registry::NewStub(controller)),
        controller_channel_(std::move(controller)),
        controller_address_(std::move(controller_address)) {}

  // Whether controller calls go to another host (--controller).
  bool has_controller() const { return controller_channel_ != nullptr; }
  // Where controller calls go: "" for this host's plugin.
  const std::string& controller_address() const { return controller_address_; }

  // Sent as `secrets` with every request that has that field and none of its own.
  void set_secrets(std::map<std::string, std::string> secrets) { secrets_ = std::move(secrets); }

  template <typename Request, typename Response>
  using IdentityMethod = grpc::Status (csi::v1::Identity::Stub::*)(grpc::ClientContext*,
                                                                   const Request&, Response*);
  template <typename Request, typename Response>
  using ControllerMethod = grpc::Status (csi::v1::Controller::Stub::*)(grpc::ClientContext*,
                                                                       const Request&, Response*);
  template <typename Request, typename Response>
  using NodeMethod = grpc::Status (csi::v1::Node::Stub::*)(grpc::ClientContext*, const Request&,
                                                           Response*);
  template <typename Request, typename Response>
  using CatalogMethod = grpc::Status (v1::Catalog::Stub::*)(grpc::ClientContext*, const Request&,
                                                            Response*);
  template <typename Request, typename Response>
  using NodeStateMethod = grpc::Status (v1::NodeState::Stub::*)(grpc::ClientContext*,
                                                                const Request&, Response*);
  template <typename Request, typename Response>
  using RegistryMethod = grpc::Status (v1::Registry::Stub::*)(grpc::ClientContext*, const Request&,
                                                              Response*);

  template <typename Request, typename Response>
  Status identity(IdentityMethod<Request, Response> method, const Request& request,
                  Response* response) {
    return call(*identity_, method, request, response);
  }
  // `deadline` for calls that copy a volume's data (commit, restore, clone).
  template <typename Request, typename Response>
  Status controller(ControllerMethod<Request, Response> method, const Request& request,
                    Response* response,
                    std::chrono::system_clock::duration deadline = kCallDeadline) {
    return call(*controller_, method, request, response, deadline, !controller_address_.empty());
  }
  template <typename Request, typename Response>
  Status node(NodeMethod<Request, Response> method, const Request& request, Response* response) {
    if (!proxy_node_.empty() && node_via_controller_) {
      return call(*node_via_controller_, method, request, response, kCallDeadline, true);
    }
    return call(*node_, method, request, response);
  }

  // What the node knows beside CSI (rosetctl.v1.NodeState): asked where node calls go.
  template <typename Request, typename Response>
  Status node_state(NodeStateMethod<Request, Response> method, const Request& request,
                    Response* response) {
    if (!proxy_node_.empty() && node_state_via_controller_) {
      return call(*node_state_via_controller_, method, request, response, kCallDeadline, true);
    }
    return call(*node_state_, method, request, response);
  }
  // The node's attach lock of a volume, held until the returned turn ends (NodeState's
  // HoldAttachLock): connect and disconnect of one volume on one node take turns.
  Expected<AttachTurn> hold_attach_lock(const v1::HoldAttachLockRequest& request) {
    bool proxied = !proxy_node_.empty() && node_state_via_controller_;
    return AttachTurn::take(proxied ? *node_state_via_controller_ : *node_state_, request,
                            proxy_node_);
  }

  // Node calls go to `node_id` through the controller's proxy (rosetctl --on-node): the same
  // calls, forwarded by the controller to that node over mutual TLS.
  void set_proxy_node(std::string node_id) {
    proxy_node_ = std::move(node_id);
    node_via_controller_ = csi::v1::Node::NewStub(controller_channel_);
    node_state_via_controller_ = v1::NodeState::NewStub(controller_channel_);
  }
  // NodeState of registered node `node_id` through the controller's proxy, asked once with a
  // short `deadline` and no retry (the combined `volume list` asks every node: one that is down
  // is reported, not waited for). UNAVAILABLE without a remote controller.
  template <typename Request, typename Response>
  Status node_state_of(const std::string& node_id, NodeStateMethod<Request, Response> method,
                       const Request& request, Response* response,
                       std::chrono::system_clock::duration deadline) {
    if (!controller_channel_) {
      return error(Code::kUnavailable, "no controller to reach node \"{}\" through", node_id);
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    context.AddMetadata(kProxyNodeKey, node_id);
    std::unique_ptr<v1::NodeState::Stub> stub = v1::NodeState::NewStub(controller_channel_);
    return from_grpc(((*stub).*method)(&context, request, response));
  }
  // The ObjectStore of node `node_id` through the controller's proxy, or of this host's plugin
  // when `node_id` is "". Calls on it carry the proxy metadata themselves (they stream: no
  // retry here). UNAVAILABLE naming the node without a remote controller.
  Expected<std::unique_ptr<v1::ObjectStore::Stub>> object_store(const std::string& node_id) {
    if (node_id.empty()) return v1::ObjectStore::NewStub(local_channel_);
    if (!controller_channel_) {
      return error(Code::kUnavailable,
                   "node \"{}\" is reached through the controller's proxy: name the controller "
                   "(--controller)",
                   node_id);
    }
    return v1::ObjectStore::NewStub(controller_channel_);
  }
  // ListVolumes accepting a partial combined list (cluster/placed_id.h kPartialListKey): the
  // nodes that did not answer are added to `unreachable` ("node \"b\" did not answer: ...").
  Status list_volumes_partial(const csi::v1::ListVolumesRequest& request,
                              csi::v1::ListVolumesResponse* response,
                              std::vector<std::string>* unreachable) {
    return send(*controller_, &csi::v1::Controller::Stub::ListVolumes, request, response,
                kCallDeadline, !controller_address_.empty(), unreachable);
  }
  // The node that node calls reach: the --on-node one, or "" for this host's.
  const std::string& proxy_node() const { return proxy_node_; }
  // rosetctl.v1's services live beside the controller, and are reached the same way.
  template <typename Request, typename Response>
  Status catalog(CatalogMethod<Request, Response> method, const Request& request,
                 Response* response, std::chrono::system_clock::duration deadline = kCallDeadline) {
    return call(*catalog_, method, request, response, deadline, !controller_address_.empty());
  }
  // `patient`: retried while a remote controller does not answer, as every call is; a
  // bookkeeping call that must not hold up the verb passes false.
  template <typename Request, typename Response>
  Status registry(RegistryMethod<Request, Response> method, const Request& request,
                  Response* response, bool patient = true) {
    return call(*registry_, method, request, response, kCallDeadline,
                patient && !controller_address_.empty());
  }

 private:
  static constexpr auto kBusyPatience = std::chrono::seconds(30);

  template <typename Stub, typename Method, typename Request, typename Response>
  Status call(Stub& stub, Method method, const Request& request, Response* response,
              std::chrono::system_clock::duration deadline = kCallDeadline, bool remote = false) {
    if constexpr (requires(Request r) { r.mutable_secrets(); }) {
      if (!secrets_.empty() && request.secrets().empty()) {
        Request with_secrets = request;
        with_secrets.mutable_secrets()->insert(secrets_.begin(), secrets_.end());
        return send(stub, method, with_secrets, response, deadline, remote);
      }
    }
    return send(stub, method, request, response, deadline, remote);
  }

  template <typename Stub, typename Method, typename Request, typename Response>
  // `unreachable`: the call accepts a partial combined list (cluster/placed_id.h) and gets the
  // nodes it lacks here.
  Status send(Stub& stub, Method method, const Request& request, Response* response,
              std::chrono::system_clock::duration deadline, bool remote,
              std::vector<std::string>* unreachable = nullptr) {
    auto give_up = std::chrono::steady_clock::now() + kBusyPatience;
    auto pause = std::chrono::milliseconds(20);
    bool said_waiting = false;
    int closed_in_a_row = 0;
    while (true) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + deadline);
      if constexpr (std::is_same_v<Stub, csi::v1::Node::Stub> ||
                    std::is_same_v<Stub, v1::NodeState::Stub>) {
        if (!proxy_node_.empty()) context.AddMetadata(kProxyNodeKey, proxy_node_);
      }
      if (unreachable != nullptr) context.AddMetadata(kPartialListKey, "1");
      Status status = from_grpc((stub.*method)(&context, request, response));
      if (unreachable != nullptr && status.is_ok()) {
        auto [first, last] = context.GetServerTrailingMetadata().equal_range(kUnreachableNodesKey);
        for (auto it = first; it != last; ++it)
          unreachable->emplace_back(it->second.data(), it->second.size());
      }
      if (remote && status.code() == Code::kUnavailable && !was_answered(context)) {
        // The controller did not answer. A TLS refusal will not go away; a restart or a
        // network hiccup may: every CSI call is idempotent, so it is sent again for a while.
        Status failure = network_failure(controller_address_, status, closed_in_a_row);
        closed_in_a_row = closed_at_once(status) ? closed_in_a_row + 1 : 0;
        status = failure;
        if (status.code() != Code::kUnavailable || std::chrono::steady_clock::now() > give_up)
          return status;
        // A connection closed at once may be a refused certificate: find out before saying
        // "retrying".
        if (!said_waiting && closed_in_a_row == 0) {
          say_unreachable(status.message());
          said_waiting = true;
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(1000));
        continue;
      }
      // ABORTED is CSI's "another call on this volume or snapshot is in flight": it goes away
      // by itself, and every CSI call is idempotent, so repeating the call is safe. Conditions
      // that last (a frozen filesystem, a file that keeps changing) are FAILED_PRECONDITION and
      // are reported at once.
      if (status.code() != Code::kAborted || std::chrono::steady_clock::now() > give_up) {
        return status;
      }
      if (!said_waiting) {
        say_waiting(status.message());
        said_waiting = true;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
  }

  static void say_unreachable(std::string_view why) {
    std::fprintf(stderr, "rosetctl: %.*s; retrying for up to %lld s\n",
                 static_cast<int>(why.size()), why.data(),
                 static_cast<long long>(kBusyPatience.count()));
  }

  // One line on stderr for the whole wait, not one per attempt.
  static void say_waiting(std::string_view busy) {
    for (std::string_view hint : {"; retry later", "; retry"}) {
      if (busy.ends_with(hint)) busy.remove_suffix(hint.size());
    }
    std::fprintf(stderr, "rosetctl: %.*s; waiting up to %lld s\n", static_cast<int>(busy.size()),
                 busy.data(), static_cast<long long>(kBusyPatience.count()));
  }

  std::shared_ptr<grpc::Channel> local_channel_;
  std::unique_ptr<csi::v1::Identity::Stub> identity_;
  std::unique_ptr<csi::v1::Controller::Stub> controller_;
  std::unique_ptr<csi::v1::Node::Stub> node_;
  std::unique_ptr<v1::NodeState::Stub> node_state_;
  std::unique_ptr<v1::Catalog::Stub> catalog_;
  std::unique_ptr<v1::Registry::Stub> registry_;
  std::shared_ptr<grpc::Channel> controller_channel_;  // null: the controller is local
  std::unique_ptr<csi::v1::Node::Stub> node_via_controller_;
  std::unique_ptr<v1::NodeState::Stub> node_state_via_controller_;
  std::string proxy_node_;
  std::map<std::string, std::string> secrets_;
  std::string controller_address_;
};

}  // namespace rosetctl::cli
