// Snapshot references, resolved by the controller's catalog.
#include "cli/snapshot_lookup.h"

#include "core/validate.h"
#include "daemon/catalog_convert.h"
#include "daemon/grpc_status.h"
#include "daemon/peer_authority.h"
#include "daemon/placed_id.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {

Expected<SnapshotRecord> resolve_snapshot(Session& session, std::string_view reference) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(reference, "snapshot"));
  v1::FindSnapshotRequest request;
  request.set_reference(std::string(reference));
  v1::FindSnapshotResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      session.client().catalog(&v1::Catalog::Stub::FindSnapshot, request, &response));
  return snapshot_record_of(response.snapshot());
}

Expected<SnapshotRecord> resolve_snapshot_to_restore(Session& session, std::string_view reference) {
  auto placed = decode_placed_id(reference);
  if (!placed) return resolve_snapshot(session, reference);
  auto stub = session.client().object_store(placed->node);
  if (!stub) return stub.status();
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + CsiClient::kCallDeadline);
  call.AddMetadata(kProxyNodeKey, placed->node);
  v1::LookupSnapshotRequest request;
  request.set_reference(placed->local_id);
  v1::LookupSnapshotResponse response;
  Status found = from_grpc((*stub)->LookupSnapshot(&call, request, &response));
  if (!found) {
    return found.with_context(
        fmt::format("snapshot {} on node \"{}\"", display_quoted(reference), placed->node));
  }
  SnapshotRecord record = snapshot_record_of(response.snapshot());
  record.id = std::string(reference);
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
