// The node a snapshot is pulled from (snapshot_pull.h), and how it is reached: dialled directly
// at the address the controller's registry records for it, over the same mutual TLS as every
// other connection (one TLS hop, and nothing between the two nodes that waits for one message
// before it reads the next); or, when it has no address or cannot be dialled from here, through
// the controller's proxy as before. Either way it is the same rosetctl.v1.ObjectStore calls.
//
// A node dialled directly must prove it is the node meant: its certificate is checked against
// the cluster CA (and the address dialled, tls_files.h) by the TLS handshake, and then its
// subject must say OU=node and CN=<that node id>, as peer_authority.h reads a caller's. Through
// the proxy, the controller vouches for the node as it does for every forwarded call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/transfer_grants.h"
#include "daemon/service_context.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

class SourceNode {
 public:
  // Reaches `node` and looks up snapshot `reference` there (into `found`): directly when the
  // registry has an address for it and this host has certificates to show
  // (PluginOptions::node_credentials), through the proxy when not, or when the direct route
  // fails before the node itself answers (the reason is logged). On the controller itself (no
  // controller channel, its own certificate as node_credentials) only directly, at the address
  // its own registry records: it is the proxy. Up to `lanes` fetches run side
  // by side (each on a connection of its own when direct).
  static Expected<SourceNode> reach(const ServiceContext& context, const std::string& node,
                                    const std::string& reference, int lanes,
                                    v1::LookupSnapshotResponse* found);

  const std::string& node() const { return node_; }
  // "directly at 192.0.2.3:9444" or "through the controller's proxy": how it was reached.
  std::string route() const;
  bool direct() const { return !address_.empty(); }
  // How many fetches may run at once (one per connection when direct).
  int lanes() const { return static_cast<int>(stubs_.size()); }

  // Streams `wants` over connection `lane` and hands every chunk to `take`; an error of `take`
  // ends the call and is returned.
  Status fetch(int lane, const std::vector<v1::ObjectRef>& wants,
               const std::function<Status(const v1::ObjectChunk&)>& take);

 private:
  SourceNode(std::string node, std::string address,
             std::vector<std::unique_ptr<v1::ObjectStore::Stub>> stubs)
      : node_(std::move(node)),
        address_(std::move(address)),
        stubs_(std::move(stubs)),
        grant_(CarriedGrant::current()) {}
  static SourceNode through_proxy(const ServiceContext& context, const std::string& node,
                                  int lanes);
  // The direct route, when there is one to try; the reason there is none otherwise.
  static Expected<SourceNode> dial(const ServiceContext& context, const std::string& node,
                                   int lanes);

  // LookupSnapshot; `answered` says whether the node itself answered (not gRPC for it).
  Expected<v1::LookupSnapshotResponse> lookup(const std::string& reference, bool* answered);

  void prepare(grpc::ClientContext& call, std::chrono::system_clock::duration deadline) const;
  // A direct peer's certificate names `node_`; through the proxy, OK.
  Status check_identity(const grpc::ClientContext& call) const;
  Status failed(const grpc::Status& status) const;

  std::string node_;
  std::string address_;  // "" through the proxy
  std::vector<std::unique_ptr<v1::ObjectStore::Stub>> stubs_;
  // The transfer grant the call that started this pull carries (transfer_grants.h), shown with
  // every read: a source reads its store to a node's certificate only under the controller's
  // grant. "" when none (a controller or this host's caller pulling needs none).
  std::string grant_;
};

}  // namespace rosetctl
