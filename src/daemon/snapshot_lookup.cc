// Snapshot references: commit id, commit id prefix, snapshot id, name.
#include "daemon/snapshot_lookup.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/commit_store/sha256.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

bool is_hex_prefix(std::string_view text) {
  return text.size() >= kMinimumCommitPrefix && text.size() < kDigestHexLength &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

Expected<SnapshotRecord> find_snapshot_by_reference(StateStore& store, std::string_view reference) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(reference, "snapshot"));
  {  // a commit id: a digest (local) or the provider's (roset)
    auto found = store.find_snapshot_by_commit(reference);
    if (!found) return found.status();
    if (found->has_value()) return std::move(**found);
  }
  {  // a snapshot id
    auto found = store.find_snapshot(reference);
    if (!found) return found.status();
    if (found->has_value()) return std::move(**found);
  }
  auto named = store.find_snapshot_by_name(reference);
  if (!named) return named.status();
  if (named->has_value()) return std::move(**named);
  if (is_hex_prefix(reference)) {
    auto all = store.list_snapshots("", 0);
    if (!all) return all.status();
    std::vector<SnapshotRecord> matches;
    for (SnapshotRecord& record : *all) {
      if (record.commit_id.starts_with(reference)) matches.push_back(std::move(record));
    }
    if (matches.size() == 1) return std::move(matches.front());
    if (matches.size() > 1) {
      std::vector<std::string> ids;
      for (const SnapshotRecord& match : matches)
        ids.push_back(match.commit_id.substr(0, 16));
      return error(Code::kInvalidArgument, "\"{}\" is the start of {} commit ids ({}); give more",
                   reference, matches.size(), fmt::join(ids, ", "));
    }
  }
  return error(Code::kNotFound,
               "no snapshot has the commit id, commit id prefix, snapshot id or name \"{}\" (see "
               "`rosetctl snapshot list`)",
               reference);
}

}  // namespace rosetctl
