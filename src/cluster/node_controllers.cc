// Channels to the registered nodes' Controller services, and how their failures read.
#include "cluster/node_controllers.h"

#include <algorithm>

#include "core/call_scope.h"
#include "core/validate.h"
#include "daemon/grpc_status.h"

namespace rosetctl {

void NodeControllers::set_tls(TlsFiles tls) {
  std::lock_guard<std::mutex> lock(mutex_);
  tls_ = std::move(tls);
  channels_.clear();
}

Expected<std::shared_ptr<grpc::Channel>> NodeControllers::channel_for(const std::string& node,
                                                                      Code unregistered) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(node, "node"));
  auto record = context_.store.find_node(node);
  if (!record) return record.status();
  if (!record->has_value()) {
    return error(unregistered,
                 "node \"{}\" is not registered with this controller (rosetctl node list shows "
                 "the registered nodes)",
                 node);
  }
  const std::string& address = (*record)->address;
  if (address.empty()) {
    return error(Code::kUnavailable,
                 "node \"{}\" registered no address: run its serve with --listen (and "
                 "--controller) so the controller can reach it",
                 node);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (tls_.certificate.empty()) {
    return error(Code::kUnavailable,
                 "this controller has no TLS certificate to reach node \"{}\" with: start it with "
                 "--listen and --tls-cert, --tls-key, --tls-ca",
                 node);
  }
  // By node and address: the channel checks that the node answering is `node` (tls_files.h).
  auto& channel = channels_[node + "@" + address];
  if (!channel) channel = kept_channel(address, peer_channel_credentials(tls_, "node", node));
  return channel;
}

Expected<std::vector<std::string>> NodeControllers::other_nodes() {
  {
    // Without a certificate no volume can have been placed on a node (a CLI run, a serve
    // without --listen): there is nobody to ask.
    std::lock_guard<std::mutex> lock(mutex_);
    if (tls_.certificate.empty()) return std::vector<std::string>{};
  }
  auto nodes = context_.store.list_nodes();
  if (!nodes) return nodes.status();
  std::vector<std::string> out;
  for (const auto& node : *nodes) {
    // A node without an address holds no placed volume: none could be made there.
    if (node.node_id != context_.options.node_id && !node.address.empty())
      out.push_back(node.node_id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::chrono::system_clock::time_point NodeControllers::deadline(
    std::chrono::milliseconds patience) {
  auto deadline = std::chrono::system_clock::now() + patience;
  if (const CallLimits* call = current_call(); call != nullptr)
    deadline = std::min(deadline, call->deadline());
  return deadline;
}

Status NodeControllers::failure(const std::string& node, const grpc::Status& status,
                                bool answered) {
  Status failed = from_grpc(status);
  auto code = status.error_code();
  if (!answered &&
      (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED)) {
    return error(Code::kUnavailable, "node \"{}\" did not answer: {}", node, failed.message());
  }
  return failed.with_context(fmt::format("node \"{}\"", node));
}

}  // namespace rosetctl
