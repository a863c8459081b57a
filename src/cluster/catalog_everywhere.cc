// The Catalog's combined view (routing_catalog.h): a lookup by placed id goes to the node the id
// names, as the CSI calls on such ids do (NodeControllers, which localizes the ids on the way
// there and places them on the way back); a lookup by name or commit asks this host and every
// node the caller may see, and takes the one answer or names each candidate. Diffs and
// verifications of a node's snapshots run on that node, as the same Catalog call.
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "cluster/peer_authority.h"
#include "cluster/placed_id.h"
#include "cluster/routing_catalog.h"
#include "core/clock.h"
#include "core/validate.h"
#include "daemon/catalog_convert.h"
#include "daemon/snapshot_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {

namespace {

// One thing a name matched: the host it lives on ("" for this one) and its id as the caller
// uses it.
struct Candidate {
  std::string node;
  std::string id;
};

std::string host_text(const std::string& node) {
  return node.empty() ? std::string("the controller host") : "node " + display_quoted(node);
}

// The answer a combined lookup gives: the one candidate; NOT_FOUND naming every candidate when
// the name is ambiguous (the user then names one by its id); NOT_FOUND when there is none, or
// UNAVAILABLE when a node that might hold it did not answer (never "not found" for what may
// exist: `volume delete` would say "nothing to delete").
Expected<Candidate> the_one(std::vector<Candidate> found, const std::vector<std::string>& silent,
                            std::string_view what, const std::string& reference,
                            std::string_view none) {
  if (found.size() == 1) return std::move(found.front());
  if (found.empty()) {
    if (silent.empty()) return error(Code::kNotFound, "{}", none);
    return error(Code::kUnavailable, "{} on the hosts that answered; {}", none,
                 fmt::join(silent, "; "));
  }
  std::vector<std::string> each;
  for (const Candidate& candidate : found)
    each.push_back(fmt::format("{} on {}", candidate.id, host_text(candidate.node)));
  return error(Code::kNotFound, "{} {} {}: {}; name the one you mean by its id",
               display_quoted(reference), kAmbiguousName, what, fmt::join(each, ", "));
}

// Whether a node's failure leaves the lookup to the others: it holds nothing of that name, or
// did not answer (reported), or serves no Catalog (a node of an older version).
bool nothing_there(const Status& status, std::vector<std::string>* silent) {
  if (status.code() == Code::kNotFound) return true;
  if (status.code() == Code::kUnavailable || status.code() == Code::kUnimplemented) {
    silent->push_back(status.message());
    return true;
  }
  return false;
}

}  // namespace

Expected<RoutingCatalog::Where> RoutingCatalog::where_is(const grpc::CallbackServerContext& call,
                                                         const std::string& reference) {
  auto placed = decode_placed_id(reference);
  if (!placed) return Where{"", reference};
  if (placed->node == context_.options.node_id) return Where{"", placed->local_id};
  // Names and references are no id fields the authorization reads (cluster/placed_fields.h): a
  // node certificate's binding is checked here, as for ids (authorization_table.h kOwnNodes).
  Peer peer = peer_of(call);
  if (peer.role == PeerRole::kNode && placed->node != peer.name) {
    return error(Code::kPermissionDenied, "{} may not ask about {}: a node acts only for itself",
                 peer.describe(), display_quoted(reference));
  }
  return Where{placed->node, placed->local_id};
}

Expected<std::vector<std::string>> RoutingCatalog::nodes_to_ask(
    const grpc::CallbackServerContext& call) {
  // A node's own Catalog answers for its store alone (it has no registry).
  if (context_.options.role == PluginRole::kNode) return std::vector<std::string>{};
  auto nodes = nodes_.other_nodes();
  if (!nodes) return nodes.status();
  // A node's certificate sees the controller host's and its own, never another node's
  // (docs/SECURITY.md), as in the combined ListVolumes.
  if (Peer peer = peer_of(call); peer.role == PeerRole::kNode) {
    std::erase_if(*nodes, [&peer](const std::string& node) { return node != peer.name; });
  }
  return nodes;
}

Status RoutingCatalog::find_volume(const grpc::CallbackServerContext& call,
                                   const v1::FindVolumeRequest& request,
                                   v1::FindVolumeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(request.name_or_id(), "volume name or id"));
  auto where = where_is(call, request.name_or_id());
  if (!where) return where.status();
  if (!where->node.empty()) {
    v1::FindVolumeRequest asked;
    asked.set_name_or_id(where->reference);
    return nodes_.call(where->node, &v1::Catalog::Stub::FindVolume, asked, response,
                       Code::kNotFound);
  }
  std::vector<Candidate> found;
  v1::FindVolumeResponse here;
  Status status = host_.find_volume_here(where->reference, &here);
  if (status.is_ok()) {
    // An id names one volume: no node has it (placed ids are the nodes' ones).
    if (here.volume_id() == where->reference || where->reference != request.name_or_id()) {
      *response = std::move(here);
      return Status::ok();
    }
    found.push_back({"", here.volume_id()});
  } else if (status.code() != Code::kNotFound) {
    return status;
  }
  auto others = nodes_to_ask(call);
  if (!others) return others.status();
  std::vector<std::string> silent;
  for (const std::string& node : *others) {
    v1::FindVolumeResponse there;
    Status asked = nodes_.call(node, &v1::Catalog::Stub::FindVolume, request, &there,
                               Code::kNotFound, NodeControllers::kListPatience);
    if (asked.is_ok()) {
      found.push_back({node, there.volume_id()});
    } else if (!nothing_there(asked, &silent)) {
      return asked;
    }
  }
  auto one = the_one(
      std::move(found), silent, "volume", request.name_or_id(),
      fmt::format("no volume is named {} or has that id", display_quoted(request.name_or_id())));
  if (!one) return one.status();
  response->set_volume_id(one->id);
  return Status::ok();
}

Status RoutingCatalog::set_volume_move(const grpc::CallbackServerContext& call,
                                       const v1::SetVolumeMoveRequest& request,
                                       v1::SetVolumeMoveResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(validate_id(request.volume_id(), "volume_id"));
  auto where = where_is(call, request.volume_id());
  if (!where) return where.status();
  if (where->node.empty()) return set_volume_move_here(context_, request);
  // The same call on the node holding the volume (its id made local on the way there).
  ROSETCTL_RETURN_IF_ERROR(nodes_.call(where->node, &v1::Catalog::Stub::SetVolumeMove, request,
                                       response, Code::kNotFound));
  if (request.step() != v1::SetVolumeMoveRequest::FINISH) return Status::ok();
  return carry_replica(request.volume_id(), request.new_volume_id(), request.to_node());
}

Status RoutingCatalog::carry_replica(const std::string& old_id, const std::string& new_id,
                                     const std::string& new_node) {
  auto kept = context_.store.find_volume_replica(old_id);
  if (!kept) return kept.status();
  if (!*kept) return Status::ok();
  // The old id names A's retired copy: rounds of it would replicate data that no longer changes.
  if ((*kept)->to_node != new_node) {
    // Due at once: its first round sends only what the replica node lacks of the moved data.
    ROSETCTL_RETURN_IF_ERROR(context_.store.put_volume_replica(
        new_id, (*kept)->to_node, (*kept)->every_seconds, unix_now_seconds()));
  } else {
    spdlog::warn(
        "volume {} moved to node \"{}\", which held its replica: its replica setting is "
        "removed (`rosetctl volume replicate` sets one on another node)",
        new_id, new_node);
  }
  return context_.store.remove_volume_replica(old_id);
}

Expected<RoutingCatalog::Located> RoutingCatalog::locate_snapshot(
    const grpc::CallbackServerContext& call, const std::string& reference) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(reference, "snapshot"));
  auto where = where_is(call, reference);
  if (!where) return where.status();
  v1::FindSnapshotRequest asked;
  asked.set_reference(where->reference);
  if (!where->node.empty()) {
    v1::FindSnapshotResponse there;
    ROSETCTL_RETURN_IF_ERROR(
        nodes_.call(where->node, &v1::Catalog::Stub::FindSnapshot, asked, &there, Code::kNotFound));
    return Located{where->node, where->reference, std::move(*there.mutable_snapshot())};
  }
  std::map<std::string, Located> found;  // by the id the caller sees
  auto here = find_snapshot_by_reference(context_.store, where->reference);
  if (here) {
    Located located{"", here->id, {}};
    fill_snapshot_details(*here, &located.details);
    // A snapshot id names one snapshot; a copy a node pulled has that node's placed id.
    if (here->id == where->reference || where->reference != reference) return located;
    found.emplace(here->id, std::move(located));
  } else if (here.status().code() != Code::kNotFound) {
    return here.status();
  }
  auto others = nodes_to_ask(call);
  if (!others) return others.status();
  std::vector<std::string> silent;
  for (const std::string& node : *others) {
    v1::FindSnapshotResponse there;
    Status status = nodes_.call(node, &v1::Catalog::Stub::FindSnapshot, asked, &there,
                                Code::kNotFound, NodeControllers::kListPatience);
    if (status.is_ok()) {
      auto local = decode_placed_id(there.snapshot().id());
      std::string id = there.snapshot().id();
      found.emplace(
          id, Located{node, local ? local->local_id : id, std::move(*there.mutable_snapshot())});
    } else if (!nothing_there(status, &silent)) {
      return status;
    }
  }
  std::vector<Candidate> candidates;
  for (const auto& [id, located] : found)
    candidates.push_back({located.node, id});
  auto one = the_one(std::move(candidates), silent, "snapshot", reference,
                     fmt::format("no snapshot has the commit id, commit id prefix, snapshot id or "
                                 "name {}",
                                 display_quoted(reference)));
  if (!one) return one.status();
  return std::move(found.at(one->id));
}

Status RoutingCatalog::volume_details(const v1::GetVolumeDetailsRequest& request,
                                      v1::GetVolumeDetailsResponse* response) {
  // By the node each id names ("" for this host's); the interceptor has checked a node
  // certificate may name them.
  std::map<std::string, v1::GetVolumeDetailsRequest> by_node;
  for (const std::string& id : request.volume_ids()) {
    auto placed = decode_placed_id(id);
    bool here = !placed || placed->node == context_.options.node_id;
    by_node[here ? "" : placed->node].add_volume_ids(here && placed ? placed->local_id : id);
  }
  for (const auto& [node, asked] : by_node) {
    v1::GetVolumeDetailsResponse part;
    ROSETCTL_RETURN_IF_ERROR(node.empty() ? host_.volume_details_here(asked, &part)
                                          : nodes_.call(node, &v1::Catalog::Stub::GetVolumeDetails,
                                                        asked, &part, Code::kNotFound));
    for (auto& details : *part.mutable_volumes())
      *response->add_volumes() = std::move(details);
  }
  return add_replicas(response);
}

Status RoutingCatalog::list_snapshots(const grpc::CallbackServerContext& call,
                                      const v1::ListSnapshotDetailsRequest& request,
                                      v1::ListSnapshotDetailsResponse* response) {
  // Who asks which host for what ("" for this host): the snapshots named, by the node their ids
  // name; one placed volume's, on its node; else this host's and every node's the caller sees.
  std::map<std::string, v1::ListSnapshotDetailsRequest> by_node;
  bool every_node = false;
  if (!request.snapshot_ids().empty()) {
    for (const std::string& id : request.snapshot_ids()) {
      auto placed = decode_placed_id(id);
      bool here = !placed || placed->node == context_.options.node_id;
      by_node[here ? "" : placed->node].add_snapshot_ids(here && placed ? placed->local_id : id);
    }
  } else if (auto placed = decode_placed_id(request.source_volume_id());
             placed && placed->node != context_.options.node_id) {
    by_node[placed->node] = request;
  } else {
    by_node[""] = request;
    if (placed) by_node[""].set_source_volume_id(placed->local_id);
    every_node = request.source_volume_id().empty();
  }
  if (every_node) {
    auto others = nodes_to_ask(call);
    if (!others) return others.status();
    for (const std::string& node : *others)
      by_node[node] = request;
  }
  std::vector<v1::SnapshotDetails> all;
  for (const auto& [node, asked] : by_node) {
    if (node.empty()) {
      ROSETCTL_RETURN_IF_ERROR(host_.list_snapshots_here(asked, &all));
      continue;
    }
    v1::ListSnapshotDetailsResponse part;
    Status status = nodes_.call(node, &v1::Catalog::Stub::ListSnapshotDetails, asked, &part,
                                Code::kNotFound, NodeControllers::kListPatience);
    // The whole list leaves out a node that is down (as the CLI's combined lists do, which
    // name it); the snapshots asked by id are that node's to answer.
    std::vector<std::string> silent;
    if (!status && every_node && nothing_there(status, &silent)) continue;
    ROSETCTL_RETURN_IF_ERROR(status);
    for (auto& details : *part.mutable_snapshots())
      all.push_back(std::move(details));
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.created_at_ns() < b.created_at_ns();
  });
  for (auto& details : all)
    *response->add_snapshots() = std::move(details);
  return Status::ok();
}

Status RoutingCatalog::diff(const grpc::CallbackServerContext& call,
                            const v1::DiffSnapshotsRequest& request,
                            v1::DiffSnapshotsResponse* response) {
  auto from = locate_snapshot(call, request.from());
  if (!from) return from.status();
  auto to = locate_snapshot(call, request.to());
  if (!to) return to.status();
  if (from->node != to->node) {
    return error(Code::kFailedPrecondition,
                 "snapshot {} is on {} and {} on {}: snapshots are compared where both are "
                 "(snapshot pull one to the other's node, then compare the copies there)",
                 from->details.id(), host_text(from->node), to->details.id(), host_text(to->node));
  }
  if (from->node.empty()) return host_.diff_here(from->local_id, to->local_id, response);
  v1::DiffSnapshotsRequest asked;
  asked.set_from(from->local_id);
  asked.set_to(to->local_id);
  return nodes_.call(from->node, &v1::Catalog::Stub::DiffSnapshots, asked, response,
                     Code::kNotFound, NodeControllers::kDataPatience);
}

Status RoutingCatalog::verify(const grpc::CallbackServerContext& call,
                              const v1::VerifySnapshotsRequest& request,
                              v1::VerifySnapshotsResponse* response) {
  // Nothing named: this host's whole store (each node verifies its own the same way).
  if (request.references().empty()) return host_.verify_here(request, response);
  // The snapshots named, by the host each is on ("" for this one), with their ids there: a
  // node's are re-read by that node, the same call over the channel CSI calls on it take.
  std::map<std::string, v1::VerifySnapshotsRequest> by_node;
  for (const std::string& reference : request.references()) {
    auto located = locate_snapshot(call, reference);
    if (!located) return located.status();
    by_node[located->node].add_references(located->local_id);
  }
  std::vector<std::string> damaged;
  for (const auto& [node, asked] : by_node) {
    v1::VerifySnapshotsResponse part;
    ROSETCTL_RETURN_IF_ERROR(node.empty() ? host_.verify_here(asked, &part)
                                          : nodes_.call(node, &v1::Catalog::Stub::VerifySnapshots,
                                                        asked, &part, Code::kNotFound,
                                                        NodeControllers::kDataPatience));
    response->set_snapshots(response->snapshots() + part.snapshots());
    response->set_objects(response->objects() + part.objects());
    response->set_bytes(response->bytes() + part.bytes());
    // What a node found is said with where: the same object may be fine on another host.
    // A node's text is its word: one holding a control character is shown escaped, so that it
    // cannot draw on the terminal of whoever reads the report.
    std::string where = node.empty() ? "" : fmt::format("on {}: ", host_text(node));
    const bool from_node = !node.empty();  // (clang 14 captures no structured binding)
    auto said = [&](const std::string& text) {
      bool plain = std::none_of(text.begin(), text.end(), [](char c) {
        auto byte = static_cast<unsigned char>(c);
        return byte < 0x20 || byte == 0x7f;
      });
      return where + (!from_node || plain ? text : escape_text(text));
    };
    for (const std::string& problem : part.problems())
      response->add_problems(said(problem));
    for (const std::string& note : part.notes())
      response->add_notes(said(note));
    // A node's damaged names too: the same name may be a sound snapshot of this host.
    for (const std::string& name : part.damaged())
      damaged.push_back(said(name));
  }
  std::sort(damaged.begin(), damaged.end());
  for (std::string& name : damaged)
    response->add_damaged(std::move(name));
  return Status::ok();
}

}  // namespace rosetctl
