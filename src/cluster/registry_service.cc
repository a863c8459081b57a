// Registry RPCs: validation of what a node says about itself, and its record in the store.
#include "cluster/registry_service.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "cluster/node_registration.h"
#include "core/clock.h"
#include "core/iscsi_name.h"
#include "core/log.h"
#include "core/validate.h"
#include "core/x509/certificates.h"
#include "daemon/call_log.h"
#include "daemon/convert.h"
#include "daemon/node_mapping.h"
#include "daemon/volume_locks.h"

namespace rosetctl {
namespace {

// How long a removal, or a registration that moves a node to another initiator name, waits for
// ControllerPublishVolume calls to this node that are in flight (and a registration for another
// one claiming the same name).
constexpr std::chrono::seconds kNodeLockPatience{10};

// Two nodes with one initiator name are one initiator to a target: mapping a volume to either
// would let both in. So a name belongs to one node; the second is refused, naming the first.
Status initiator_taken(std::string_view node_id, std::string_view initiator,
                       std::string_view holder) {
  return error(Code::kAlreadyExists,
               "node \"{}\" cannot register iscsi_initiator {}: node \"{}\" holds that name, and "
               "two nodes with one name would each get into the other's volumes; give every host "
               "an initiator name of its own (iscsi-iname makes one for "
               "/etc/iscsi/initiatorname.iscsi; restart iscsid after), or remove node \"{}\" "
               "first (rosetctl node remove {})",
               node_id, display_quoted(initiator, 223), holder, holder, holder);
}

// Whether the stored name is the one a registration gives (in its normal form). A row from
// before names were checked may hold another spelling of it: the same initiator, no move.
bool same_initiator(std::string_view stored, std::string_view given) {
  if (stored.empty() || given.empty()) return stored == given;
  auto stored_normal = normalize_iscsi_name(stored, "iscsi_initiator");
  return stored_normal && *stored_normal == given;
}

void fill_node(const NodeRecord& record, v1::Node* node) {
  node->set_node_id(record.node_id);
  node->set_address(record.address);
  node->set_iscsi_initiator(record.iscsi_initiator);
  fill_map(record.topology, node->mutable_topology());
  node->set_version(record.version);
  node->set_registered_at(record.registered_at_ns);
  node->set_last_seen(record.last_seen_ns);
  node->set_cordoned_at(record.cordoned_at_ns);
}

}  // namespace

grpc::ServerUnaryReactor* RegistryService::RegisterNode(Request* call,
                                                        const v1::RegisterNodeRequest* request,
                                                        v1::RegisterNodeResponse* response) {
  return answer(handlers_, call, "RegisterNode", request, response,
                [=, this] { return register_node(*request, response); });
}

grpc::ServerUnaryReactor* RegistryService::GetNode(Request* call, const v1::GetNodeRequest* request,
                                                   v1::GetNodeResponse* response) {
  return answer(handlers_, call, "GetNode", request, response,
                [=, this] { return get_node(*request, response); });
}

grpc::ServerUnaryReactor* RegistryService::TouchNode(Request* call,
                                                     const v1::TouchNodeRequest* request,
                                                     v1::TouchNodeResponse* response) {
  return answer(handlers_, call, "TouchNode", request, response,
                [=, this] { return touch_node(*request, response); });
}

grpc::ServerUnaryReactor* RegistryService::ListNodes(Request* call,
                                                     const v1::ListNodesRequest* request,
                                                     v1::ListNodesResponse* response) {
  return answer(handlers_, call, "ListNodes", request, response,
                [=, this] { return list_nodes(response); });
}

grpc::ServerUnaryReactor* RegistryService::RemoveNode(Request* call,
                                                      const v1::RemoveNodeRequest* request,
                                                      v1::RemoveNodeResponse* response) {
  return answer(handlers_, call, "RemoveNode", request, response,
                [=, this] { return remove_node(*request, response); });
}

grpc::ServerUnaryReactor* RegistryService::CordonNode(Request* call,
                                                      const v1::CordonNodeRequest* request,
                                                      v1::CordonNodeResponse* response) {
  return answer(handlers_, call, "CordonNode", request, response,
                [=, this] { return cordon_node(*request, response); });
}

grpc::ServerUnaryReactor* RegistryService::CheckTransferGrant(
    Request* call, const v1::CheckTransferGrantRequest* request,
    v1::CheckTransferGrantResponse* response) {
  return answer(handlers_, call, "CheckTransferGrant", request, response,
                [=, this] { return check_transfer_grant(*call, *request, response); });
}

// What a grant of this controller lets a reader take from the node asking (the source). The
// token comes in the metadata, so no log line shows it; a node asks only of its own store
// (authorization_table.h), so it learns nothing of grants of others'.
Status RegistryService::check_transfer_grant(const grpc::ServerContextBase& call,
                                             const v1::CheckTransferGrantRequest& request,
                                             v1::CheckTransferGrantResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.node_id(), "node_id"));
  std::string token = carried_grant(call);
  if (token.empty()) {
    return error(Code::kInvalidArgument,
                 "the call carries no transfer grant (gRPC metadata \"{}\")", kTransferGrantKey);
  }
  TransferGrants::Clock::duration left{};
  auto grant = context_.transfer_grants.find(token, &left);
  if (!grant || grant->source != request.node_id()) {
    return error(Code::kNotFound,
                 "this controller issued no transfer grant of node {}'s store by that token, or "
                 "it expired",
                 display_quoted(request.node_id()));
  }
  // A receiver revoked since the grant was issued reads nothing more under it.
  auto revoked_at = context_.store.node_certificates_revoked_at(grant->receiver);
  if (!revoked_at) return revoked_at.status();
  if (*revoked_at && **revoked_at >= grant->issued_unix) {
    return error(Code::kPermissionDenied,
                 "the transfer grant's receiver, node {}, was revoked after the grant was issued",
                 display_quoted(grant->receiver));
  }
  response->set_receiver_node_id(grant->receiver);
  response->set_reference(grant->reference);
  response->set_valid_ms(std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
  return Status::ok();
}

namespace {

// An address as compared for uniqueness: the port as a number, an IP literal in its canonical
// form (an IPv4-mapped IPv6 address as the IPv4 one), a host name in lower case. A host name and
// an address of the same host still compare unequal; the dialled certificate is checked anyway.
std::string canonical_address(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return address;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (auto ip = canonical_ip_address(host)) {
    host = *ip;
    if (host.starts_with("::ffff:") && host.find('.') != std::string::npos) host = host.substr(7);
  } else {
    std::transform(host.begin(), host.end(), host.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  unsigned long port = std::strtoul(address.c_str() + colon + 1, nullptr, 10);
  return fmt::format("{}#{}", host, port);
}

}  // namespace

// One address, one node: a node registering another's address would have the controller dial
// that node when it means this one (the dialled certificate is checked too: tls_files.h).
Status RegistryService::check_address_free(const std::string& node_id,
                                           const std::string& address) const {
  if (address.empty()) return Status::ok();
  auto nodes = context_.store.list_nodes();
  if (!nodes) return nodes.status();
  const std::string wanted = canonical_address(address);
  for (const NodeRecord& other : *nodes) {
    if (other.node_id != node_id && canonical_address(other.address) == wanted) {
      return error(Code::kAlreadyExists,
                   "address {} is registered by node {}: every node registers an address of its "
                   "own (rosetctl node remove {} if that node is gone)",
                   display_quoted(address), display_quoted(other.node_id),
                   display_quoted(other.node_id));
    }
  }
  return Status::ok();
}

Status RegistryService::register_node(const v1::RegisterNodeRequest& request,
                                      v1::RegisterNodeResponse* response) {
  const std::string& id = request.node_id();
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(id, "node_id"));
  ROSETCTL_RETURN_IF_ERROR(validate_node_address(request.address()));
  ROSETCTL_RETURN_IF_ERROR(validate_initiator_name(request.iscsi_initiator()));
  const std::string& initiator = request.iscsi_initiator();
  StringMap topology = to_map(request.topology());
  ROSETCTL_RETURN_IF_ERROR(validate_topology(topology));
  ROSETCTL_RETURN_IF_ERROR(validate_version(request.version()));

  ROSETCTL_RETURN_IF_ERROR(check_address_free(request.node_id(), request.address()));
  auto before = registered_as(id);
  if (!before) return before.status();
  // A new name for the node: its name is claimed (one registration at a time may claim it) and
  // no publication to the node comes or goes while its volumes' ACLs move to the new name.
  std::vector<HeldLock> held;
  if (!same_initiator(before->iscsi_initiator, initiator)) {
    if (!initiator.empty()) {
      auto claim = context_.locks.wait_lock(
          initiator_lock_key(initiator), LockMode::kExclusive,
          busy_message(fmt::format("iSCSI initiator name {}", display_quoted(initiator, 223))),
          kNodeLockPatience);
      if (!claim) return claim.status();
      held.push_back(std::move(*claim));
    }
    auto node_lock =
        context_.locks.wait_lock(node_lock_key(id), LockMode::kExclusive,
                                 busy_message(fmt::format("node \"{}\"", id)), kNodeLockPatience);
    if (!node_lock) return node_lock.status();
    held.push_back(std::move(*node_lock));
    before = registered_as(id);  // another registration of the node may have come first
    if (!before) return before.status();
  }
  if (!initiator.empty()) {
    auto holder = context_.store.node_with_initiator(initiator, id);
    if (!holder) return holder.status();
    if (holder->has_value()) return initiator_taken(id, initiator, **holder);
  }

  // A registration naming no address keeps the recorded one: `node register` (the node's own
  // CLI, an admin's) does not know where the node's serve listens, and erasing it would leave
  // the node unreachable for transfers until serve's next heartbeat.
  std::string address = request.address().empty() ? before->address : request.address();
  const int64_t now = unix_now_ns();
  NodeRecord node{id, std::move(address), initiator, std::move(topology), request.version(), now,
                  now};
  if (!same_initiator(before->iscsi_initiator, initiator)) {
    // The ACLs move before the record does: a move stopped half-way leaves the old name on
    // record, so the node's next registration moves them again.
    auto closed = move_node_mappings(context_, *before, node);
    if (!closed) {
      return closed.status().with_context(fmt::format("registering node \"{}\"", id));
    }
    for (const std::string& line : *closed)
      spdlog::warn("registering node \"{}\": {}", id, escape_text(line));
  }
  auto stored = context_.store.upsert_node(node);
  if (!stored) {
    return stored.status().with_context(fmt::format("registering node \"{}\"", node.node_id));
  }
  fill_node(*stored, response->mutable_node());
  return Status::ok();
}

// The node's record, or one with only its id when it is not registered (it may still have
// publications: a forced removal leaves them).
Expected<NodeRecord> RegistryService::registered_as(const std::string& id) {
  auto known = context_.store.find_node(id);
  if (!known) return known.status();
  if (known->has_value()) return std::move(**known);
  NodeRecord none;
  none.node_id = id;
  return none;
}

Status RegistryService::get_node(const v1::GetNodeRequest& request, v1::GetNodeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.node_id(), "node_id"));
  auto node = context_.store.find_node(request.node_id());
  if (!node) return node.status();
  if (!node->has_value()) {
    return error(Code::kNotFound,
                 "node \"{}\" is not registered with this controller (rosetctl node list shows "
                 "the registered nodes)",
                 request.node_id());
  }
  fill_node(**node, response->mutable_node());
  return Status::ok();
}

Status RegistryService::touch_node(const v1::TouchNodeRequest& request,
                                   v1::TouchNodeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.node_id(), "node_id"));
  auto node = context_.store.find_node(request.node_id());
  if (!node) return node.status();
  if (!node->has_value()) {
    return error(Code::kNotFound, "node \"{}\" is not registered with this controller",
                 request.node_id());
  }
  NodeRecord seen = std::move(**node);
  seen.last_seen_ns = unix_now_ns();
  auto stored = context_.store.upsert_node(seen);
  if (!stored) return stored.status();
  fill_node(*stored, response->mutable_node());
  return Status::ok();
}

Status RegistryService::list_nodes(v1::ListNodesResponse* response) {
  auto nodes = context_.store.list_nodes();
  if (!nodes) return nodes.status();
  for (const NodeRecord& node : *nodes)
    fill_node(node, response->add_nodes());
  return Status::ok();
}

Status RegistryService::remove_node(const v1::RemoveNodeRequest& request,
                                    v1::RemoveNodeResponse* response) {
  const std::string& id = request.node_id();
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(id, "node_id"));
  // ControllerPublishVolume holds it shared from its check of the registry to its record.
  auto lock =
      context_.locks.wait_lock(node_lock_key(id), LockMode::kExclusive,
                               busy_message(fmt::format("node \"{}\"", id)), kNodeLockPatience);
  if (!lock) return lock.status();
  auto removal = context_.store.delete_node(id, request.force());
  if (!removal) {
    if (removal.status().code() != Code::kFailedPrecondition) return removal.status();
    return error(Code::kFailedPrecondition,
                 "{}; unmap them first (rosetctl volume unmap VOLUME --node {}), or remove the "
                 "node anyway with force (rosetctl node remove {} --force), which leaves them "
                 "published",
                 removal.status().message(), id, id);
  }
  response->set_removed(removal->removed);
  for (const std::string& volume_id : removal->published_volume_ids)
    response->add_published_volume_ids(volume_id);
  if (request.revoke()) {
    // After the removal: a removal refused (volumes published) revokes nothing. A node not
    // registered is revoked all the same: its certificate may be the one to keep out.
    int64_t now = unix_now_seconds();
    ROSETCTL_RETURN_IF_ERROR(context_.store.revoke_node_certificates(id, now));
    response->set_revoked_at_unix(now);
  }
  return Status::ok();
}

// The cordon is read by placement (RoutingController::create_volume) at each CreateVolume: no
// cache to refresh, so a cordon holds from the next placement on.
Status RegistryService::cordon_node(const v1::CordonNodeRequest& request,
                                    v1::CordonNodeResponse* response) {
  const std::string& id = request.node_id();
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(id, "node_id"));
  auto before = context_.store.find_node(id);
  if (!before) return before.status();
  auto stored = context_.store.set_node_cordoned(id, request.cordoned() ? unix_now_ns() : 0);
  if (!stored) return stored.status();
  if (!stored->has_value()) {
    return error(Code::kNotFound,
                 "node \"{}\" is not registered with this controller (rosetctl node list shows "
                 "the registered nodes; the controller's own node is never cordoned)",
                 id);
  }
  bool was = before->has_value() && (*before)->cordoned_at_ns != 0;
  response->set_changed(was != request.cordoned());
  fill_node(**stored, response->mutable_node());
  if (response->changed()) {
    spdlog::info("node \"{}\" {}", id,
                 request.cordoned() ? "cordoned: no new volume is placed on it" : "uncordoned");
  }
  return Status::ok();
}

}  // namespace rosetctl
