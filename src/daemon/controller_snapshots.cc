// Controller snapshot RPCs (CreateSnapshot, DeleteSnapshot, ListSnapshots): validation,
// idempotency by name, locking, and the snapshot records; the provider makes the snapshot.
//
// CreateSnapshot records a pending snapshot under an id of ours, lets the provider take it in
// the background, and answers when it is done or after `snapshot_wait`, whichever comes first:
// then with ready_to_use=false, as the spec allows for snapshots that need processing.
// ListSnapshots reports it ready once the provider has finished; a retry of CreateSnapshot with
// the same name returns it, or the provider's error if it failed.
#include <google/protobuf/util/time_util.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/clock.h"
#include "core/map_lookup.h"
#include "core/validate.h"
#include "daemon/content_source.h"
#include "daemon/controller_service.h"
#include "daemon/convert.h"
#include "daemon/csi_secrets.h"
#include "daemon/snapshot_ids.h"
#include "daemon/snapshot_locks.h"
#include "daemon/snapshot_parameters.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {
namespace {

Status validate_snapshot_parameters(const StringMap& parameters) {
  for (const auto& [key, value] : parameters) {
    if (key == kSnapshotMessageParameter || key.starts_with(kKubernetesParameterPrefix)) continue;
    if (key == kSnapshotPreCopyParameter) {
      if (value == "true" || value == "false") continue;
      return error(Code::kInvalidArgument, "snapshot parameter {} is {}: give true or false",
                   kSnapshotPreCopyParameter, display_quoted(value));
    }
    return error(Code::kInvalidArgument, "unknown snapshot parameter {} (known: {}, {})",
                 display_quoted(key), kSnapshotMessageParameter, kSnapshotPreCopyParameter);
  }
  return Status::ok();
}

void fill_snapshot(const SnapshotRecord& record, csi::v1::Snapshot* snapshot) {
  snapshot->set_snapshot_id(record.id);
  snapshot->set_source_volume_id(record.source_volume_id);
  // What a volume made from it needs (CSI: a restore is never smaller than this).
  snapshot->set_size_bytes(restore_size_bytes(record));
  snapshot->set_ready_to_use(record.ready);
  *snapshot->mutable_creation_time() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(record.created_at_ns);
}

// Held by whoever is taking the snapshot: free while the record is pending means its taker died.
std::string snapshot_work_lock_key(std::string_view id) {
  return fmt::format("snapshot-work:{}", id);
}

Status failure_of(const SnapshotRecord& record) {
  return Status(static_cast<Code>(record.failure_code), record.failure)
      .with_context(fmt::format("snapshot \"{}\"", record.name));
}

}  // namespace

// A pending record nobody works on any more (its process ended) is removed: a crash leaves no
// snapshot, and a retry of CreateSnapshot starts afresh. nullopt when it was removed.
Expected<std::optional<SnapshotRecord>> ControllerService::settle_abandoned(SnapshotRecord record) {
  if (record.ready || record.failure_code != 0) return std::optional(std::move(record));
  auto work = context_.locks.try_lock(snapshot_work_lock_key(record.id), LockMode::kExclusive, "");
  if (!work) return std::optional(std::move(record));  // still being taken
  auto again = context_.store.find_snapshot(record.id);
  if (!again) return again.status();
  if (!again->has_value() || (*again)->ready || (*again)->failure_code != 0) {
    return std::move(*again);  // gone, or finished just now
  }
  spdlog::warn(
      "snapshot \"{}\" of volume \"{}\" was interrupted (the process taking it "
      "ended); its record is removed",
      record.name, record.source_volume_name);
  ROSETCTL_RETURN_IF_ERROR(context_.store.delete_snapshot(record.id));
  return std::optional<SnapshotRecord>();
}

void ControllerService::take_snapshot(SnapshotRecord record, SnapshotSide* snapshots,
                                      std::vector<HeldLock> locks, const StringMap& secrets) {
  SnapshotSpec spec{record.name,      record.source_volume_id, record.source_volume_name,
                    record.parent_id, record.message,          context_.options.progress,
                    secrets,          staging_locker()};
  spec.pre_copy =
      value_or_empty(record.parameters, std::string(kSnapshotPreCopyParameter)) == "true";
  auto created = snapshots->create_snapshot(spec, [&](const ProvisionedSnapshot& made) {
    SnapshotRecord done = record;
    done.commit_id = made.id;
    done.size_bytes = made.size_bytes;
    done.file_count = made.file_count;
    done.new_bytes = made.new_bytes;
    done.created_at_ns = made.created_at_ns;
    done.context = made.context;
    done.ready = true;
    return context_.store.update_snapshot(done);
  });
  if (!created) {
    spdlog::warn("snapshot \"{}\" of volume \"{}\" failed: {}", record.name,
                 record.source_volume_name, escape_text(created.status().message()));
    record.failure_code = static_cast<int>(created.status().code());
    record.failure = created.status().message();
    if (Status noted = context_.store.update_snapshot(record); !noted) {
      spdlog::warn("cannot record the failure of snapshot {}: {}", record.id,
                   escape_text(noted.message()));
    }
  }
  locks.clear();  // only now may another commit of the volume, or a delete, begin
}

Status ControllerService::create_snapshot(const csi::v1::CreateSnapshotRequest& request,
                                          csi::v1::CreateSnapshotResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.source_volume_id(), "source_volume_id"));
  ROSETCTL_RETURN_IF_ERROR(validate_name(request.name(), "name"));
  if (is_snapshot_id(request.name())) {
    return error(Code::kInvalidArgument,
                 "snapshot name \"{}\" looks like a snapshot id; choose another", request.name());
  }
  StringMap parameters = to_map(request.parameters());
  ROSETCTL_RETURN_IF_ERROR(validate_snapshot_parameters(parameters));
  const std::string& source_id = request.source_volume_id();

  auto name_lock =
      context_.locks.try_lock(snapshot_name_lock_key(request.name()), LockMode::kExclusive,
                              busy_message(fmt::format("snapshot \"{}\"", request.name())));
  if (!name_lock) return name_lock.status();
  // Names and ids share the CLI's namespace (a provider's commit ids need not look like ids).
  for (auto find : {&StateStore::find_snapshot, &StateStore::find_snapshot_by_commit}) {
    auto clash = (context_.store.*find)(request.name());
    if (!clash) return clash.status();
    if (clash->has_value()) {
      return error(Code::kAlreadyExists,
                   "snapshot name \"{}\" is the id of another snapshot; choose another",
                   request.name());
    }
  }
  auto existing = context_.store.find_snapshot_by_name(request.name());
  if (!existing) return existing.status();
  if (existing->has_value()) {
    if ((*existing)->source_volume_id != source_id) {
      return error(Code::kAlreadyExists,
                   "snapshot \"{}\" already exists and was taken of volume \"{}\", not \"{}\"",
                   request.name(), (*existing)->source_volume_id, source_id);
    }
  }
  auto settled = existing->has_value()
                     ? settle_abandoned(std::move(**existing))
                     : Expected<std::optional<SnapshotRecord>>(std::optional<SnapshotRecord>());
  if (!settled) return settled.status();
  if (settled->has_value()) {
    const SnapshotRecord& found = **settled;
    if (found.failure_code != 0) {
      // Reported once; the retry that follows starts afresh.
      ROSETCTL_RETURN_IF_ERROR(context_.store.delete_snapshot(found.id));
      return failure_of(found);
    }
    fill_snapshot(found, response->mutable_snapshot());
    return Status::ok();
  }

  std::vector<HeldLock> locks;
  auto volume_lock = try_lock_volume(context_.locks, source_id, LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  locks.push_back(std::move(*volume_lock));
  auto commit_lock =
      context_.locks.try_lock(commit_lock_key(source_id), LockMode::kExclusive,
                              busy_message(fmt::format("a snapshot of volume \"{}\"", source_id)));
  if (!commit_lock) return commit_lock.status();
  locks.push_back(std::move(*commit_lock));
  auto volume = load_volume(context_, source_id);
  if (!volume) return volume.status();
  // A paused volume's snapshot is its move's last delta; a moved one's copy here is no longer it.
  ROSETCTL_RETURN_IF_ERROR(refuse_moving_volume(context_, source_id, false));
  auto snapshots = snapshot_side(*volume->provider);
  if (!snapshots) return snapshots.status();
  auto parent = context_.store.latest_snapshot_of(source_id);
  if (!parent) return parent.status();

  SnapshotRecord record;
  record.created_at_ns = unix_now_ns();
  record.id = new_snapshot_id(record.created_at_ns);
  record.name = request.name();
  record.provider = volume->record.provider;
  record.source_volume_id = source_id;
  record.source_volume_name = volume->record.name;
  record.source_capacity_bytes = volume->record.capacity_bytes;
  record.parent_id = parent->has_value() ? (*parent)->commit_id : "";
  record.message = value_or_empty(parameters, std::string(kSnapshotMessageParameter));
  record.parameters = parameters;
  auto work = context_.locks.try_lock(snapshot_work_lock_key(record.id), LockMode::kExclusive,
                                      busy_message(fmt::format("snapshot {}", record.id)));
  if (!work) return work.status();
  locks.push_back(std::move(*work));
  ROSETCTL_RETURN_IF_ERROR(context_.store.insert_snapshot(record));

  auto done = background_.start([this, record, snapshots = *snapshots,
                                 held = std::make_shared<std::vector<HeldLock>>(std::move(locks)),
                                 secrets = csi_secrets(request.secrets())]() mutable {
    take_snapshot(record, snapshots, std::move(*held), secrets);
  });
  done.wait_for(context_.options.snapshot_wait);
  auto now = context_.store.find_snapshot(record.id);
  if (!now) return now.status();
  if (!now->has_value())
    return error(Code::kAborted, "snapshot {} was deleted meanwhile", record.id);
  if ((*now)->failure_code != 0) {
    ROSETCTL_RETURN_IF_ERROR(context_.store.delete_snapshot(record.id));
    return failure_of(**now);
  }
  fill_snapshot(**now, response->mutable_snapshot());
  return Status::ok();
}

Status ControllerService::delete_snapshot(const csi::v1::DeleteSnapshotRequest& request) {
  if (request.snapshot_id().empty()) {
    return error(Code::kInvalidArgument, "snapshot_id is required");
  }
  // An id we could never have issued names no snapshot: deleting it is already done.
  if (!validate_id(request.snapshot_id(), "snapshot_id")) return Status::ok();
  auto lock =
      context_.locks.try_lock(snapshot_lock_key(request.snapshot_id()), LockMode::kExclusive,
                              busy_message(fmt::format("snapshot {}", request.snapshot_id())));
  if (!lock) return lock.status();
  auto found = context_.store.find_snapshot(request.snapshot_id());
  if (!found) return found.status();
  if (!found->has_value()) return Status::ok();
  auto settled = settle_abandoned(std::move(**found));
  if (!settled) return settled.status();
  if (!settled->has_value()) return Status::ok();
  const SnapshotRecord* record = &**settled;
  if (!record->ready && record->failure_code == 0) {
    return error(Code::kAborted, "snapshot {} is still being taken; retry once it is ready",
                 record->id);
  }
  auto forget = [&] { return context_.store.delete_snapshot(request.snapshot_id()); };
  if (!record->ready) return forget();  // a failed snapshot stored nothing
  auto provider = context_.providers.by_name(record->provider);
  if (!provider) return provider.status();
  auto snapshots = snapshot_side(**provider);
  if (!snapshots) return snapshots.status();
  return (*snapshots)->delete_snapshot_with(*record, csi_secrets(request.secrets()), forget);
}

Status ControllerService::list_snapshots(const csi::v1::ListSnapshotsRequest& request,
                                         csi::v1::ListSnapshotsResponse* response) {
  if (request.max_entries() < 0) {
    return error(Code::kInvalidArgument, "max_entries must not be negative");
  }
  // The token is the id of the last snapshot returned: any snapshot id is a resume point.
  const std::string& token = request.starting_token();
  if (!token.empty() && !is_snapshot_id(token)) {
    return error(Code::kAborted,
                 "starting_token {} is not a token this plugin issued; start the listing again",
                 display_quoted(token, 128));
  }
  const std::string& source = request.source_volume_id();
  if (!request.snapshot_id().empty()) {
    auto record = context_.store.find_snapshot(request.snapshot_id());
    if (!record) return record.status();
    if (record->has_value() && (source.empty() || (*record)->source_volume_id == source)) {
      auto settled = settle_abandoned(std::move(**record));
      if (!settled) return settled.status();
      if (settled->has_value())
        fill_snapshot(**settled, response->add_entries()->mutable_snapshot());
    }
    return Status::ok();
  }
  int limit = request.max_entries();
  auto records = context_.store.list_snapshots(token, limit > 0 ? limit + 1 : 0, source);
  if (!records) return records.status();
  bool more = limit > 0 && static_cast<int>(records->size()) > limit;
  if (more) records->pop_back();
  if (more) response->set_next_token(records->back().id);
  for (SnapshotRecord& record : *records) {
    auto settled = settle_abandoned(std::move(record));
    if (!settled) return settled.status();
    if (settled->has_value()) fill_snapshot(**settled, response->add_entries()->mutable_snapshot());
  }
  return Status::ok();
}

}  // namespace rosetctl
