// Holding reads of a commit store to their transfer grants (granted_reads.h).
#include "cluster/granted_reads.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <set>

#include "cluster/authorization_table.h"
#include "cluster/peer_authority.h"
#include "core/commit_store/commit_store.h"
#include "core/validate.h"
#include "daemon/call_log.h"
#include "daemon/grpc_status.h"
#include "daemon/snapshot_lookup.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {
namespace {

constexpr auto kGrantQuestionDeadline = std::chrono::seconds(10);
constexpr std::string_view kPullSnapshotMethod = "/rosetctl.v1.ObjectStore/PullSnapshot";

// A grant this node does not know yet, as its controller tells it; nothing is kept when the
// controller knows none (the check then says so). The controller itself has nobody to ask:
// its own book holds every grant there is.
Status ask_controller_about(ClusterContext& context, const std::string& token) {
  if (!context.options.controller_channel) return Status::ok();
  auto registry = v1::Registry::NewStub(context.options.controller_channel);
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + kGrantQuestionDeadline);
  call.AddMetadata(kTransferGrantKey, token);
  v1::CheckTransferGrantRequest request;
  request.set_node_id(context.options.node_id);
  v1::CheckTransferGrantResponse response;
  grpc::Status status = registry->CheckTransferGrant(&call, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return Status::ok();
  if (!status.ok()) {
    return from_grpc(status).with_context(
        "asking the controller about the transfer grant the reader showed");
  }
  context.transfer_grants.keep(
      token, {response.receiver_node_id(), context.options.node_id, response.reference()},
      std::chrono::milliseconds(response.valid_ms()));
  return Status::ok();
}

struct HeldGrant {
  std::string token;
  TransferGrant grant;
};

// The grant `call` carries, held to `reference` (nullopt: a fetch of objects); nullopt when it
// carries none and needs none.
Expected<std::optional<HeldGrant>> grant_of_read(ClusterContext& context,
                                                 const grpc::ServerContextBase& call,
                                                 std::optional<std::string> reference) {
  Peer peer = peer_of(call);
  const std::string& self = context.options.node_id;
  auto refused = [&](std::string_view why) {
    return error(Code::kPermissionDenied, "{} may not read node {}'s snapshots: {}",
                 peer.describe(), display_quoted(self), why);
  };
  std::string token = carried_grant(call);
  if (token.empty()) {
    // The interceptor refused this already (authorization.h); fail closed all the same.
    if (peer.role == PeerRole::kNode && peer.name != self) {
      return refused(
          "it carried no transfer grant: a node reads another node's snapshots only for a "
          "transfer the controller started");
    }
    return std::optional<HeldGrant>();
  }
  if (!context.transfer_grants.knows(token))
    ROSETCTL_RETURN_IF_ERROR(ask_controller_about(context, token));
  GrantedRead read{
      .receiver = peer.role == PeerRole::kNode ? std::optional(peer.name) : std::nullopt,
      .source = self,
      .reference = std::move(reference)};
  auto grant = context.transfer_grants.check(token, read);
  if (!grant) return refused(grant.status().message());
  return std::optional(HeldGrant{std::move(token), std::move(*grant)});
}

// Every object of the granted snapshot: its commit, its tree, the blobs the tree names. Worked
// out once a grant (a big tree takes a while to read), then kept with it.
Expected<std::shared_ptr<const std::set<std::string>>> granted_objects(ClusterContext& context,
                                                                       const HeldGrant& held) {
  if (auto known = context.transfer_grants.objects(held.token)) return known;
  auto record = find_snapshot_by_reference(context.store, held.grant.reference);
  if (!record) return record.status();
  auto store = CommitStore::open(context.layout.commit_store_dir());
  if (!store) return store.status();
  auto commit = (*store)->read_commit(record->commit_id);
  if (!commit) return commit.status();
  auto tree = (*store)->read_tree(commit->tree);
  if (!tree) return tree.status();
  auto ids = std::make_shared<std::set<std::string>>();
  ids->insert(record->commit_id);
  ids->insert(commit->tree);
  for (const TreeEntry& entry : tree->entries) {
    if (entry.type == EntryType::kRegular && !entry.content.empty()) ids->insert(entry.content);
  }
  context.transfer_grants.set_objects(held.token, ids);
  return std::shared_ptr<const std::set<std::string>>(std::move(ids));
}

}  // namespace

Status check_granted_lookup(ClusterContext& context, const grpc::ServerContextBase& call,
                            const std::string& reference) {
  return grant_of_read(context, call, reference).status();
}

Status check_granted_fetch(ClusterContext& context, const grpc::ServerContextBase& call,
                           const v1::FetchObjectsRequest& request) {
  auto held = grant_of_read(context, call, std::nullopt);
  if (!held) return held.status();
  if (!held->has_value()) return Status::ok();
  auto ids = granted_objects(context, **held);
  if (!ids) {
    return ids.status().with_context(fmt::format("snapshot {} (the one the transfer grant is for)",
                                                 display_quoted((*held)->grant.reference)));
  }
  for (const v1::ObjectRef& ref : request.objects()) {
    if (!(*ids)->contains(ref.id())) {
      return error(Code::kPermissionDenied,
                   "{} may not read object {} of node {}: it is no part of snapshot {}, the one "
                   "its transfer grant is for",
                   peer_of(call).describe(), display_quoted(ref.id(), 80),
                   display_quoted(context.options.node_id),
                   display_quoted((*held)->grant.reference));
    }
  }
  return Status::ok();
}

Status check_proxied_read(ClusterContext& context, const grpc::ServerContextBase& call,
                          std::string_view method, const std::string& source) {
  Peer peer = peer_of(call);
  if (peer.role != PeerRole::kNode || !reads_a_commit_store(method) || source == peer.name) {
    return Status::ok();
  }
  std::string token = carried_grant(call);
  Status why = token.empty()
                   ? error(Code::kPermissionDenied, "it carried no transfer grant")
                   : context.transfer_grants.check(token, {.receiver = peer.name, .source = source})
                         .status();
  if (why) return why;
  return error(Code::kPermissionDenied,
               "{} may not read node {}'s snapshots through the "
               "controller: {}",
               peer.describe(), display_quoted(source), why.message());
}

std::string grant_to_forward(ClusterContext& context, const grpc::ServerContextBase& call,
                             std::string_view method, const std::string& receiver,
                             const v1::PullSnapshotRequest* pull) {
  if (method == kPullSnapshotMethod && pull != nullptr && peer_of(call).role != PeerRole::kNode) {
    return context.transfer_grants.issue({receiver, pull->from_node_id(), pull->reference()});
  }
  return carried_grant(call);
}

}  // namespace rosetctl
