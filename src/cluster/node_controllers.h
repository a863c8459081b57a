// The controller's CSI Controller calls to its registered nodes: with `local` volumes on nodes,
// the controller has the node that holds (or is to hold) a volume run the very same Controller
// call on its own store, over the mutual-TLS channel the node proxy uses (cluster/node_proxy.h),
// with the controller's certificate; a node takes Controller calls from no other certificate.
// The Catalog calls about a node's volumes and snapshots (names, snapshot details) go the same
// way to the node's own Catalog (routing_catalog.h).
// Ids are localized on the way there and placed on the way back (cluster/placed_fields.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/placed_fields.h"
#include "cluster/tls_files.h"
#include "core/status.h"
#include "csi.grpc.pb.h"
#include "daemon/grpc_status.h"
#include "daemon/service_context.h"

namespace rosetctl {

class NodeControllers {
 public:
  explicit NodeControllers(ServiceContext& context) : context_(context) {}

  // The controller's own certificate files (serve --listen's); none: no node can be asked.
  void set_tls(TlsFiles tls);

  template <typename Request, typename Response, typename Stub = csi::v1::Controller::Stub>
  using Rpc = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

  // Runs `rpc` on `node`'s Controller service. A node that is not registered is `unregistered`
  // (the code the spec wants for the call: RESOURCE_EXHAUSTED for a create, NOT_FOUND or
  // UNAVAILABLE otherwise), one that does not answer within `patience` (or the caller's deadline)
  // UNAVAILABLE; both name the node. The node's own errors come back with its name added.
  // `metadata` goes with the call (keys the node's handler reads: cluster/placed_id.h).
  // `rpc` is a method of the node's Controller service, or of its Catalog.
  template <typename Stub, typename Request, typename Response>
  Status call(const std::string& node, Rpc<Request, Response, Stub> rpc, Request request,
              Response* response, Code unregistered,
              std::chrono::milliseconds patience = kDefaultPatience,
              const std::map<std::string, std::string>& metadata = {}) {
    auto channel = channel_for(node, unregistered);
    if (!channel) return channel.status();
    Stub stub(*channel);
    localize_ids(request, node);
    grpc::ClientContext call;
    call.set_deadline(deadline(patience));
    for (const auto& [key, value] : metadata)
      call.AddMetadata(key, value);
    grpc::Status status = (stub.*rpc)(&call, request, response);
    if (!status.ok()) return failure(node, status, was_answered(call));
    // What a node calls its own volume or snapshot must be its own (a placed id there would
    // have the controller act on another node with its own certificate later).
    ROSETCTL_RETURN_IF_ERROR(check_answer_names_its_own(*response, node));
    return place_ids(*response, node);
  }

  // The registered nodes other than this host that have an address, by id: the nodes a
  // combined list asks (none without TLS files).
  Expected<std::vector<std::string>> other_nodes();

  static constexpr std::chrono::milliseconds kDefaultPatience{60000};
  // How long a combined list waits for one node.
  static constexpr std::chrono::milliseconds kListPatience{5000};
  // A call that copies data (a restore, a snapshot fetched from another node first): as long as
  // its caller waits (the CLI's data calls: 24 h).
  static constexpr std::chrono::milliseconds kDataPatience{std::chrono::hours(24)};

 private:
  Expected<std::shared_ptr<grpc::Channel>> channel_for(const std::string& node, Code unregistered);
  static std::chrono::system_clock::time_point deadline(std::chrono::milliseconds patience);
  // `answered`: the node's handler answered (daemon/grpc_status.h), so an UNAVAILABLE is the
  // node's own word about something else (a source node it could not reach), not its silence.
  static Status failure(const std::string& node, const grpc::Status& status, bool answered);

  ServiceContext& context_;
  std::mutex mutex_;
  TlsFiles tls_;                                                    // guarded by mutex_
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // by node@address; mutex_
};

}  // namespace rosetctl
