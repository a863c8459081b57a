// Checks on a snapshot record another node answers with, before this node keeps it.
#include "cluster/pulled_snapshot.h"

#include "core/commit_store/sha256.h"
#include "core/validate.h"
#include "daemon/request_limits.h"
#include "daemon/snapshot_ids.h"
#include "daemon/snapshot_lookup.h"

namespace rosetctl {
namespace {

// A prefix as LookupSnapshot resolves a reference (snapshot_lookup.h).
bool is_commit_prefix(std::string_view reference, std::string_view commit_id) {
  return reference.size() >= kMinimumCommitPrefix && reference.size() < kDigestHexLength &&
         commit_id.starts_with(reference);
}

bool names(const SnapshotRecord& answer, std::string_view reference, PullReference how) {
  if (answer.id == reference) return true;
  if (how == PullReference::kSnapshotId) return false;
  return answer.commit_id == reference || answer.name == reference ||
         is_commit_prefix(reference, answer.commit_id);
}

std::size_t map_bytes(const std::map<std::string, std::string>& map) {
  std::size_t bytes = 0;
  for (const auto& [key, value] : map)
    bytes += key.size() + value.size();
  return bytes;
}

// The first thing a local CreateSnapshot (controller_snapshots.cc) would not have recorded.
Status first_refusal(const SnapshotRecord& record) {
  if (!is_snapshot_id(record.id)) {
    return error(Code::kDataLoss, "id {} is not a snapshot id", display_quoted(record.id));
  }
  ROSETCTL_RETURN_IF_ERROR(validate_name(record.name, "name"));
  if (is_snapshot_id(record.name)) {
    return error(Code::kDataLoss, "name \"{}\" looks like a snapshot id", record.name);
  }
  ROSETCTL_RETURN_IF_ERROR(validate_name(record.provider, "provider"));
  if (!record.source_volume_id.empty())
    ROSETCTL_RETURN_IF_ERROR(validate_id(record.source_volume_id, "source volume id"));
  if (!record.source_volume_name.empty())
    ROSETCTL_RETURN_IF_ERROR(validate_name(record.source_volume_name, "source volume name"));
  if (!record.parent_id.empty() && !is_digest_hex(record.parent_id)) {
    return error(Code::kDataLoss, "parent {} is not a commit id", display_quoted(record.parent_id));
  }
  if (record.size_bytes < 0 || record.file_count < 0 || record.new_bytes < 0 ||
      record.source_capacity_bytes < 0) {
    return error(Code::kDataLoss, "it counts negative files or bytes");
  }
  if (record.failure_code != 0 || !record.failure.empty()) {
    return error(Code::kDataLoss, "it is ready and failed at once");
  }
  if (record.message.size() > kMaxMapBytes) {
    return error(Code::kDataLoss, "its message holds {} bytes; a snapshot's may hold {}",
                 record.message.size(), kMaxMapBytes);
  }
  for (const auto* map : {&record.parameters, &record.context}) {
    if (map_bytes(*map) > kMaxMapBytes) {
      return error(Code::kDataLoss, "its {} hold {} bytes; a snapshot's may hold {}",
                   map == &record.parameters ? "parameters" : "context", map_bytes(*map),
                   kMaxMapBytes);
    }
  }
  return Status::ok();
}

}  // namespace

Status check_answer_is_the_one_asked(const SnapshotRecord& answer, std::string_view reference,
                                     PullReference how, std::string_view node) {
  if (names(answer, reference, how)) return Status::ok();
  return error(Code::kDataLoss,
               "node \"{}\" was asked for snapshot {} and answered with snapshot {} (name {}, "
               "commit {}), which {} does not name; nothing was stored",
               node, display_quoted(reference), display_quoted(answer.id),
               display_quoted(answer.name), display_quoted(answer.commit_id),
               how == PullReference::kSnapshotId ? "that id" : "that reference");
}

Status check_pulled_record(const SnapshotRecord& record, std::string_view node) {
  Status refused = first_refusal(record);
  if (refused.is_ok()) return Status::ok();
  return error(Code::kDataLoss,
               "node \"{}\" answered with snapshot {} that this node refuses to record: {}; "
               "nothing was stored",
               node, display_quoted(record.id), refused.message());
}

}  // namespace rosetctl
