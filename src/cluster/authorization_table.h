// The one authorization table: for every RPC of every service rosetctl serves (CSI Identity,
// Controller and Node; rosetctl.v1 Registry, Catalog, NodeState, ObjectStore and Enrollment), which
// certificate roles may call it where a controller answers and where a node answers, and how a
// node's certificate binds to the request. It is data: cluster/authorization.cc enforces it for
// every call in one server interceptor before any handler runs, docs/SECURITY.md prints it
// (tests/unit/cluster/authorization_test.cc checks the two agree), and a method that is
// not in it is refused, whoever calls (default deny).
//
// Callers on the unix socket and the CLI's in-process channel are this host ("local") and may
// make every call in the table; a certificate without a rosetctl role may make none.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rosetctl {

// Certificate roles, as a set.
enum Callers : uint8_t {
  kNobody = 0,
  kAdmins = 1,
  kControllers = 2,
  kNodes = 4,
  // A TLS peer without a certificate: a node plugin asking for its first one. Only the
  // controller's enrollment listener lets such a peer in (serve --enroll-listen).
  kUnauthenticated = 8,
  kAdminsAndControllers = kAdmins | kControllers,
  kEveryRole = kAdmins | kControllers | kNodes,
};

// How a node's certificate (OU=node, CN=<node id>) binds to a call it may make.
enum class NodeBinding {
  // Any node may make it: it reads nothing of another node's (the plugin's name, the registry
  // of nodes and their addresses).
  kAnyNode,
  // Every node the request names is the caller's own, or the controller host (whose volumes
  // and snapshots every consumer shares): its `node_id`, the node of every placed id in it
  // (cluster/placed_id.h, at any depth), every `topology.rosetctl.io/node` segment. So a node
  // manages the controller host's volumes and its own, never another node's.
  kOwnNodes,
  // Only on its own node: the node that answers (the server's own, or the node the call is
  // forwarded to) is the caller, and the request names no other node.
  kOwnNode,
  // Reading a commit store to move a snapshot between nodes: the node itself, and another node
  // only for a transfer the controller started, with the grant it issued for it
  // (cluster/transfer_grants.h): the call carries one, and the source (or the controller's proxy)
  // holds the read to it.
  kGrantedReceiver,
};

struct MethodAccess {
  std::string_view method;  // its full name, "/csi.v1.Node/NodeStageVolume"
  Callers on_controller;    // where a controller answers (serve --role controller or all)
  Callers on_node;          // where a node answers (--role node, --role all's own node side,
                            // and every call a controller forwards to a node)
  NodeBinding node_binding;
  std::string_view why;  // one line for the printed table
};

// Every entry, in the order the table prints.
const std::vector<MethodAccess>& authorization_table();

// The entry of `method` (its full name); null when it has none, and nobody may call it.
const MethodAccess* find_method_access(std::string_view method);

// Whether a node serves `method`'s service: Node, NodeState, ObjectStore (and, on a node
// only, the Controller service its controller places volumes through and the Catalog it asks
// about them, which are never forwarded by their metadata).
bool node_side_service(std::string_view method);

// Whether `method` only reads a node's commit store to move a snapshot (LookupSnapshot,
// FetchObjects): what a controller answers for its own host from its own ObjectStore.
bool reads_a_commit_store(std::string_view method);

// The table as the Markdown docs/SECURITY.md holds between its generated-table markers.
std::string authorization_table_markdown();

}  // namespace rosetctl
