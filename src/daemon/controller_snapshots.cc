// Controller snapshot RPCs (CreateSnapshot, DeleteSnapshot, ListSnapshots): validation,
// idempotency by name, locking, and the snapshot records; the provider makes the snapshot.
//
// CreateSnapshot is synchronous: the snapshot id is the commit id, a hash of the content, so it
// cannot be handed out before the content is read. Every snapshot it returns is ready_to_use.
// If the caller gives up waiting, the commit still finishes and a retry with the same name
// returns it (ABORTED while it runs).
#include <google/protobuf/util/time_util.h>

#include "core/commit_store/sha256.h"
#include "core/validate.h"
#include "daemon/controller_service.h"
#include "daemon/convert.h"
#include "daemon/snapshot_locks.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"

namespace rosetctl {
namespace {

constexpr std::string_view kMessageParameter = "message";
constexpr std::string_view kKubernetesPrefix = "csi.storage.k8s.io/";

Status validate_snapshot_parameters(const StringMap& parameters) {
  for (const auto& [key, value] : parameters) {
    if (key == kMessageParameter || key.starts_with(kKubernetesPrefix)) continue;
    return error(Code::kInvalidArgument, "unknown snapshot parameter \"{}\" (known: message)",
                 display_quoted(key));
  }
  return Status::ok();
}

void fill_snapshot(const SnapshotRecord& record, csi::v1::Snapshot* snapshot) {
  snapshot->set_snapshot_id(record.id);
  snapshot->set_source_volume_id(record.source_volume_id);
  snapshot->set_size_bytes(record.size_bytes);
  snapshot->set_ready_to_use(true);
  *snapshot->mutable_creation_time() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(record.created_at_ns);
}

std::string message_of(const StringMap& parameters) {
  auto it = parameters.find(std::string(kMessageParameter));
  return it == parameters.end() ? "" : it->second;
}

}  // namespace

Status ControllerService::create_snapshot(const csi::v1::CreateSnapshotRequest& request,
                                          csi::v1::CreateSnapshotResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.source_volume_id(), "source_volume_id"));
  ROSETCTL_RETURN_IF_ERROR(validate_name(request.name(), "name"));
  if (is_digest_hex(request.name())) {
    return error(Code::kInvalidArgument,
                 "snapshot name \"{}\" looks like a snapshot id (64 hex digits); choose another",
                 request.name());
  }
  StringMap parameters = to_map(request.parameters());
  ROSETCTL_RETURN_IF_ERROR(validate_snapshot_parameters(parameters));
  const std::string& source_id = request.source_volume_id();

  auto name_lock =
      context_.locks.try_lock(snapshot_name_lock_key(request.name()), LockMode::kExclusive,
                              busy_message(fmt::format("snapshot \"{}\"", request.name())));
  if (!name_lock) return name_lock.status();
  // Names and ids share the CLI's namespace ("roset-<commit>" ids are not hex digests).
  auto clash = context_.store.find_snapshot(request.name());
  if (!clash) return clash.status();
  if (clash->has_value()) {
    return error(Code::kAlreadyExists, "snapshot name \"{}\" is the id of another snapshot",
                 request.name());
  }
  auto existing = context_.store.find_snapshot_by_name(request.name());
  if (!existing) return existing.status();
  if (existing->has_value()) {
    if ((*existing)->source_volume_id != source_id) {
      return error(Code::kAlreadyExists,
                   "snapshot \"{}\" already exists and was taken of volume \"{}\", not \"{}\"",
                   request.name(), (*existing)->source_volume_id, source_id);
    }
    fill_snapshot(**existing, response->mutable_snapshot());
    return Status::ok();
  }

  auto volume_lock = context_.locks.try_lock(volume_lock_key(source_id), LockMode::kShared,
                                             busy_message(fmt::format("volume \"{}\"", source_id)));
  if (!volume_lock) return volume_lock.status();
  auto commit_lock =
      context_.locks.try_lock(commit_lock_key(source_id), LockMode::kExclusive,
                              busy_message(fmt::format("a snapshot of volume \"{}\"", source_id)));
  if (!commit_lock) return commit_lock.status();
  auto volume = load_volume(context_, source_id);
  if (!volume) return volume.status();
  auto parent = context_.store.latest_snapshot_of(source_id);
  if (!parent) return parent.status();

  SnapshotSpec spec{request.name(),           source_id,
                    volume->record.name,      parent->has_value() ? (*parent)->id : "",
                    message_of(parameters),   context_.options.progress,
                    to_map(request.secrets())};
  SnapshotRecord record;
  auto created = volume->provider->create_snapshot(spec, [&](const ProvisionedSnapshot& made) {
    record = SnapshotRecord{made.id,         request.name(),      volume->record.provider,
                            source_id,       volume->record.name, spec.parent_id,
                            spec.message,    parameters,          made.size_bytes,
                            made.file_count, made.new_bytes,      made.created_at_ns};
    return context_.store.insert_snapshot(record);
  });
  if (!created) return created.status();
  fill_snapshot(record, response->mutable_snapshot());
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
  auto record = context_.store.find_snapshot(request.snapshot_id());
  if (!record) return record.status();
  if (!record->has_value()) return Status::ok();
  auto provider = context_.providers.by_name((*record)->provider);
  if (!provider) return provider.status();
  // The record goes first: a crash in between leaves unrecorded data that garbage collection
  // removes, never a record whose data is gone.
  ROSETCTL_RETURN_IF_ERROR(context_.store.delete_snapshot(request.snapshot_id()));
  return (*provider)->delete_snapshot(**record);
}

Status ControllerService::list_snapshots(const csi::v1::ListSnapshotsRequest& request,
                                         csi::v1::ListSnapshotsResponse* response) {
  if (request.max_entries() < 0) {
    return error(Code::kInvalidArgument, "max_entries must not be negative");
  }
  // The token is the id of the last snapshot returned: any snapshot id is a resume point.
  const std::string& token = request.starting_token();
  if (!token.empty() && !is_digest_hex(token) && !context_.providers.for_volume(token)) {
    return error(Code::kAborted,
                 "starting_token \"{}\" is not a token this plugin issued; start the listing "
                 "again",
                 display_quoted(token));
  }
  const std::string& source = request.source_volume_id();
  if (!request.snapshot_id().empty()) {
    auto record = context_.store.find_snapshot(request.snapshot_id());
    if (!record) return record.status();
    if (record->has_value() && (source.empty() || (*record)->source_volume_id == source)) {
      fill_snapshot(**record, response->add_entries()->mutable_snapshot());
    }
    return Status::ok();
  }
  int limit = request.max_entries();
  auto records = context_.store.list_snapshots(token, limit > 0 ? limit + 1 : 0, source);
  if (!records) return records.status();
  bool more = limit > 0 && static_cast<int>(records->size()) > limit;
  if (more) records->pop_back();
  for (const SnapshotRecord& record : *records) {
    fill_snapshot(record, response->add_entries()->mutable_snapshot());
  }
  if (more) response->set_next_token(records->back().id);
  return Status::ok();
}

}  // namespace rosetctl
