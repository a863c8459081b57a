// Roset commits as snapshots, and read-only volumes restored from them (roset-api.md §3).
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "core/call_scope.h"
#include "core/clock.h"
#include "core/map_lookup.h"
#include "core/random_id.h"
#include "core/validate.h"
#include "providers/roset/api_json.h"
#include "providers/roset/roset_api.h"
#include "providers/roset/roset_context.h"
#include "providers/roset/roset_provider.h"

namespace rosetctl {
namespace {

constexpr std::string_view kSnapshotPrefix = "roset-";
constexpr auto kCommitPatience = std::chrono::seconds(120);
constexpr auto kCommitPoll = std::chrono::milliseconds(500);

std::string snapshot_ref(std::string_view snapshot_name) {
  return fmt::format("rosetctl/{}", snapshot_name);
}

std::string restore_ref(std::string_view volume_name) {
  return fmt::format("rosetctl/restore/{}", volume_name);
}

std::string commit_of(std::string_view snapshot_id) {
  return std::string(snapshot_id.substr(kSnapshotPrefix.size()));
}

// Polls until the commit is completed (or failed: an error quoting the server's reason).
Expected<RosetCommit> wait_for_commit(RosetApi& api, RosetCommit commit,
                                      std::string_view volume_name) {
  auto deadline = std::chrono::steady_clock::now() + kCommitPatience;
  while (commit.status != "completed") {
    if (commit.status == "failed") {
      return error(Code::kInternal, "Roset commit {} of volume \"{}\" failed: {}",
                   display_quoted(commit.id), volume_name,
                   commit.error_message.empty() ? "no reason given"
                                                : escape_text(commit.error_message.substr(0, 300)));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return error(Code::kUnavailable,
                   "Roset commit {} of volume \"{}\" is still {} after {} s; ask again with the "
                   "same snapshot name to pick it up",
                   display_quoted(commit.id), volume_name,
                   commit.status.empty() ? "pending" : display_quoted(commit.status),
                   kCommitPatience.count());
    }
    // As for the timeout above: the Roset commit goes on, and a retry picks it up.
    ROSETCTL_RETURN_IF_ERROR(check_current_call());
    std::this_thread::sleep_for(kCommitPoll);
    auto polled = api.get_commit(commit.id);
    if (!polled) return polled.status();
    std::string node_id = commit.node_id;
    commit = std::move(*polled);
    if (commit.node_id.empty()) commit.node_id = node_id;
  }
  return commit;
}

}  // namespace

Expected<ProvisionedSnapshot> RosetProvider::create_snapshot(const SnapshotSpec& spec,
                                                             const RecordSnapshot& record) {
  auto volume = store_.find_volume(spec.volume_id);
  if (!volume) return volume.status();
  if (!volume->has_value()) {
    return error(Code::kNotFound, "volume \"{}\" does not exist", spec.volume_id);
  }
  const StringMap& context = (*volume)->context;
  if (value_or_empty(context, kContextReadOnly) == "true") {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is a read-only restore of commit {}; snapshot the volume it came "
                 "from instead",
                 spec.volume_name, value_or_empty(context, kRosetCommitId));
  }
  std::string node_id = value_or_empty(context, kRosetNodeId);
  auto endpoint = resolve_endpoint(config_, spec.secrets, value_or_empty(context, kRosetApiUrl),
                                   value_or_empty(context, kRosetMountId));
  if (!endpoint) return endpoint.status();
  RosetApi api(*http_, *endpoint);
  // Derived from the snapshot name: a retried CreateSnapshot finds the same commit.
  std::string key = fmt::format("rosetctl-commit-{}-{}", node_id, spec.name);
  auto created = api.create_commit(node_id, spec.message.empty() ? spec.name : spec.message, key);
  if (!created) return created.status();
  auto commit = wait_for_commit(api, *created, spec.volume_name);
  if (!commit) return commit.status();
  // The pin keeps the commit named (and, where retention applies, kept) while we list it.
  ROSETCTL_RETURN_IF_ERROR(api.put_ref(snapshot_ref(spec.name), commit->id));

  ProvisionedSnapshot made;
  made.id = fmt::format("{}{}", kSnapshotPrefix, commit->id);
  made.size_bytes = commit->total_size;
  made.file_count = commit->file_count;
  made.new_bytes = 0;  // Roset does not say what a commit added
  made.created_at_ns = parse_timestamp_ns(commit->created_at);
  if (made.created_at_ns == 0) made.created_at_ns = unix_now_ns();
  if (Status recorded = record(made); !recorded) {
    (void)api.delete_ref(snapshot_ref(spec.name));
    return recorded;
  }
  return made;
}

Status RosetProvider::delete_snapshot(const SnapshotRecord& snapshot) {
  return drop_snapshot_pin(snapshot, {});
}

// The pin goes before the record: a pin left behind by a crash would keep the commit forever,
// and no collection could find it; a record left behind is deleted again (404 = done).
Status RosetProvider::delete_snapshot_with(const SnapshotRecord& snapshot, const StringMap& secrets,
                                           const ForgetSnapshot& forget) {
  ROSETCTL_RETURN_IF_ERROR(drop_snapshot_pin(snapshot, secrets));
  return forget();
}

// What this host can check of a Roset snapshot is its commit, through the API: that it exists
// and completed. Its data Roset keeps (and checks) itself; there is nothing here to re-hash.
Expected<SnapshotVerification> RosetProvider::verify_snapshots(
    const std::vector<SnapshotRecord>& snapshots, ProgressSink* /*progress*/) {
  SnapshotVerification checked;
  for (const SnapshotRecord& snapshot : snapshots) {
    ROSETCTL_RETURN_IF_ERROR(check_current_call());
    if (!snapshot.ready) continue;  // no commit yet: nothing to check
    auto volume = store_.find_volume(snapshot.source_volume_id);
    StringMap context = volume && volume->has_value() ? (*volume)->context : StringMap{};
    auto endpoint = endpoint_for(context, {});
    if (!endpoint) return endpoint.status();
    std::string problem;
    if (!snapshot.commit_id.starts_with(kSnapshotPrefix)) {
      problem = fmt::format("its commit {} is no Roset commit", display_quoted(snapshot.commit_id));
    } else {
      std::string commit_id = commit_of(snapshot.commit_id);
      auto commit = RosetApi(*http_, *endpoint).get_commit(commit_id);
      if (!commit && commit.status().code() != Code::kNotFound) return commit.status();
      if (!commit) {
        problem = fmt::format("the Roset API has no commit {}", display_quoted(commit_id));
      } else if (commit->status != "completed") {
        problem = fmt::format("Roset commit {} is {}, not completed", display_quoted(commit_id),
                              display_quoted(commit->status));
      }
    }
    ++checked.snapshots;
    if (problem.empty()) continue;
    checked.problems.push_back(
        fmt::format("snapshot {} ({}): {}", snapshot.id, display_quoted(snapshot.name), problem));
    checked.damaged.push_back(snapshot.name);
  }
  if (!snapshots.empty()) {
    checked.notes.push_back(fmt::format(
        "{} roset snapshot(s) checked with the Roset API (each commit exists and completed); "
        "Roset keeps their data and verifies it itself, so nothing of it was re-hashed here",
        snapshots.size()));
  }
  return checked;
}

Status RosetProvider::drop_snapshot_pin(const SnapshotRecord& snapshot, const StringMap& secrets) {
  auto volume = store_.find_volume(snapshot.source_volume_id);
  StringMap context = volume && volume->has_value() ? (*volume)->context : StringMap{};
  auto endpoint = endpoint_for(context, secrets);
  if (!endpoint) return endpoint.status();
  // The API cannot delete a commit: the snapshot ends with its pin.
  return RosetApi(*http_, *endpoint).delete_ref(snapshot_ref(snapshot.name));
}

Expected<ProvisionedVolume> RosetProvider::create_restored_volume(const CreateVolumeSpec& spec) {
  for (const Capability& capability : spec.capabilities) {
    if (capability.access_mode != AccessMode::kSingleNodeReaderOnly &&
        capability.access_mode != AccessMode::kMultiNodeReaderOnly) {
      return error(Code::kInvalidArgument,
                   "a volume restored from a Roset commit can only be read-only: the Roset API has "
                   "no clone or checkout of a commit, so the restore shows the committed folder "
                   "itself; ask for a read-only access mode (ReadOnlyMany; `rosetctl snapshot "
                   "restore --read-only`)");
    }
  }
  auto snapshot = store_.find_snapshot_by_commit(spec.source.id);
  if (!snapshot) return snapshot.status();
  if (!snapshot->has_value() || !spec.source.id.starts_with(kSnapshotPrefix)) {
    return error(Code::kNotFound, "snapshot {} is not a Roset commit this host knows",
                 spec.source.id);
  }
  auto source = store_.find_volume((*snapshot)->source_volume_id);
  if (!source) return source.status();
  if (!source->has_value()) {
    return error(Code::kFailedPrecondition,
                 "the volume snapshot {} was taken of is deleted, and with it the folder a "
                 "restore would show",
                 spec.source.id);
  }
  const StringMap& from = (*source)->context;
  auto endpoint = resolve_endpoint(config_, spec.secrets, value_or_empty(from, kRosetApiUrl),
                                   value_or_empty(from, kRosetMountId));
  if (!endpoint) return endpoint.status();
  RosetApi api(*http_, *endpoint);
  std::string commit_id = commit_of(spec.source.id);
  auto commit = api.get_commit(commit_id);
  if (!commit) return commit.status();
  if (commit->status != "completed") {
    return error(Code::kFailedPrecondition, "Roset commit {} is {}, not completed",
                 display_quoted(commit_id), display_quoted(commit->status));
  }
  std::string ref = restore_ref(spec.name);
  ROSETCTL_RETURN_IF_ERROR(api.put_ref(ref, commit_id));

  ProvisionedVolume volume;
  volume.id = fmt::format("roset-restore-{}", random_hex(8));
  volume.capacity_bytes = spec.required_bytes;
  volume.context = {{kContextType, std::string(kTypeFolder)},
                    {kRosetNodeId, commit->node_id.empty() ? value_or_empty(from, kRosetNodeId)
                                                           : commit->node_id},
                    {kRosetRootPath, value_or_empty(from, kRosetRootPath)},
                    {kRosetApiUrl, endpoint->api_url},
                    {kContextReadOnly, "true"},
                    {kRosetCommitId, commit_id},
                    {kRosetRef, ref}};
  if (!endpoint->mount_id.empty()) volume.context[kRosetMountId] = endpoint->mount_id;
  return volume;
}

}  // namespace rosetctl
