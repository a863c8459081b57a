// Snapshot references, resolved by the controller's catalog.
#include "cli/snapshot_lookup.h"

#include "core/validate.h"
#include "daemon/catalog_convert.h"
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
