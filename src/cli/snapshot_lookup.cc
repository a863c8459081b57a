// Snapshot references, resolved by the controller's catalog.
#include "cli/snapshot_lookup.h"

#include "cluster/peer_authority.h"
#include "cluster/placed_id.h"
#include "core/validate.h"
#include "daemon/catalog_convert.h"
#include "daemon/grpc_status.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {

Expected<SnapshotRecord> resolve_snapshot(Session& session, std::string_view reference) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(reference, "snapshot"));
  v1::FindSnapshotRequest request;
  request.set_reference(std::string(reference));
  v1::FindSnapshotResponse response;
  ROSETCTL_RETURN_IF_ERROR(with_only_this_host_hint(
      session, session.client().catalog(&v1::Catalog::Stub::FindSnapshot, request, &response)));
  return snapshot_record_of(response.snapshot());
}

namespace {

// LookupSnapshot of `local_id` on `node`, through the controller's proxy.
Expected<SnapshotRecord> look_up_on_node(Session& session, const std::string& node,
                                         const std::string& local_id) {
  auto stub = session.client().object_store(node);
  if (!stub) return stub.status();
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + CsiClient::kCallDeadline);
  call.AddMetadata(kProxyNodeKey, node);
  v1::LookupSnapshotRequest request;
  request.set_reference(local_id);
  v1::LookupSnapshotResponse response;
  ROSETCTL_RETURN_IF_ERROR(from_grpc((*stub)->LookupSnapshot(&call, request, &response)));
  return snapshot_record_of(response.snapshot());
}

}  // namespace

Expected<SnapshotRecord> resolve_snapshot_to_restore(Session& session, std::string_view reference,
                                                     std::string_view target_node) {
  auto placed = decode_placed_id(reference);
  if (!placed) {
    // A name or commit with the node the volume is to be made on: its copy there, if it has
    // one (a snapshot pulled there, or taken there), else wherever the name leads.
    if (!target_node.empty() && session.client().has_controller()) {
      auto held = look_up_on_node(session, std::string(target_node), std::string(reference));
      if (held) {
        auto id = encode_placed_id(target_node, held->id);
        if (!id) return id.status();
        held->id = std::move(*id);
        return held;
      }
      // A node's certificate may not read another node's store (issue 31's grants): the
      // create placed there is then refused or allowed on its own, as without --node.
      Code code = held.status().code();
      if (code != Code::kNotFound && code != Code::kPermissionDenied) {
        return held.status().with_context(fmt::format("node \"{}\"", target_node));
      }
    }
    return resolve_snapshot(session, reference);
  }
  // The node the volume is made on restores from its own copy when it holds the snapshot whole,
  // without asking the node the id names (daemon/content_source.cc): so it is asked first, and
  // a create there works while that node is down. Only a record of the very id counts.
  if (!target_node.empty() && target_node != placed->node) {
    auto held = look_up_on_node(session, std::string(target_node), placed->local_id);
    if (held && held->id == placed->local_id) {
      held->id = std::string(reference);
      return held;
    }
  }
  auto record = look_up_on_node(session, placed->node, placed->local_id);
  if (!record) {
    return record.status().with_context(
        fmt::format("snapshot {} on node \"{}\"", display_quoted(reference), placed->node));
  }
  record->id = std::string(reference);
  return record;
}

Status no_snapshot_state(const GlobalOptions& globals, std::string_view reference) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(reference, "snapshot"));
  return error(Code::kNotFound,
               "no snapshot has the commit id, commit id prefix, snapshot id or name \"{}\" (no "
               "state in \"{}\" yet)",
               reference, globals.state_dir);
}

bool is_block_snapshot(const SnapshotRecord& snapshot) {
  auto access = snapshot.context.find(kContextAccess);
  return access != snapshot.context.end() && access->second == kAccessBlock;
}

}  // namespace rosetctl::cli
