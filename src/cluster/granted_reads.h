// The source's half of transfer grants (cluster/transfer_grants.h): before this node's commit
// store answers a read (ObjectStore LookupSnapshot, FetchObjects), the read is held to the grant
// it carries. Runs in the handler, on the handler pool: a grant this node does not know yet is
// asked of the controller (Registry CheckTransferGrant) and kept, so later reads of the same
// transfer wait on nothing.
//
// A node's certificate reading another node's store must carry a grant naming it as the
// receiver (the interceptor refused such a call without one already: authorization.h); any
// caller's read that carries a grant (the controller's proxy passes on the one its caller
// showed, after checking that caller is the receiver) is held to the grant's snapshot.
#pragma once

#include <grpcpp/server_context.h>

#include <string>

#include "cluster/cluster_context.h"
#include "core/status.h"
#include "rosetctl.pb.h"

namespace rosetctl {

// LookupSnapshot of `reference`: the snapshot granted.
Status check_granted_lookup(ClusterContext& context, const grpc::ServerContextBase& call,
                            const std::string& reference);

// FetchObjects: only objects of the snapshot granted (its commit, its tree, the blobs the tree
// names).
Status check_granted_fetch(ClusterContext& context, const grpc::ServerContextBase& call,
                           const v1::FetchObjectsRequest& request);

// On the controller's proxy (node_proxy.h): a node's certificate reading node `source`'s store
// through it carries a grant of this controller naming that node as the receiver. OK for every
// other call.
Status check_proxied_read(ClusterContext& context, const grpc::ServerContextBase& call,
                          std::string_view method, const std::string& source);

// The grant to send with a call forwarded to node `receiver` (by the controller's proxy, or a
// role-all server's forwarding: node_forward.h): for a PullSnapshot (`pull`) that an admin, the
// controller or this host asks, a new grant of that transfer (the controller starts it); else
// the grant the caller showed; "" for none.
std::string grant_to_forward(ClusterContext& context, const grpc::ServerContextBase& call,
                             std::string_view method, const std::string& receiver,
                             const v1::PullSnapshotRequest* pull);

}  // namespace rosetctl
