// Field-by-field copies; the proto's field names are the records'.
#include "daemon/catalog_convert.h"

#include "daemon/convert.h"

namespace rosetctl {

void fill_snapshot_details(const SnapshotRecord& record, v1::SnapshotDetails* details) {
  details->set_id(record.id);
  details->set_name(record.name);
  details->set_provider(record.provider);
  details->set_source_volume_id(record.source_volume_id);
  details->set_source_volume_name(record.source_volume_name);
  details->set_parent_id(record.parent_id);
  details->set_message(record.message);
  fill_map(record.parameters, details->mutable_parameters());
  details->set_size_bytes(record.size_bytes);
  details->set_file_count(record.file_count);
  details->set_new_bytes(record.new_bytes);
  details->set_created_at_ns(record.created_at_ns);
  details->set_commit_id(record.commit_id);
  details->set_ready(record.ready);
  details->set_failure_code(record.failure_code);
  details->set_failure(record.failure);
  fill_map(record.context, details->mutable_context());
  details->set_source_capacity_bytes(record.source_capacity_bytes);
}

SnapshotRecord snapshot_record_of(const v1::SnapshotDetails& details) {
  SnapshotRecord record;
  record.id = details.id();
  record.name = details.name();
  record.provider = details.provider();
  record.source_volume_id = details.source_volume_id();
  record.source_volume_name = details.source_volume_name();
  record.parent_id = details.parent_id();
  record.message = details.message();
  record.parameters = to_map(details.parameters());
  record.size_bytes = details.size_bytes();
  record.file_count = details.file_count();
  record.new_bytes = details.new_bytes();
  record.created_at_ns = details.created_at_ns();
  record.commit_id = details.commit_id();
  record.ready = details.ready();
  record.failure_code = details.failure_code();
  record.failure = details.failure();
  record.context = to_map(details.context());
  record.source_capacity_bytes = details.source_capacity_bytes();
  return record;
}

void fill_tree_change(const TreeChange& change, v1::TreeChange* proto) {
  switch (change.kind) {
    case TreeChange::Kind::kAdded:
      proto->set_kind(v1::TreeChange::ADDED);
      break;
    case TreeChange::Kind::kRemoved:
      proto->set_kind(v1::TreeChange::REMOVED);
      break;
    case TreeChange::Kind::kChanged:
      proto->set_kind(v1::TreeChange::CHANGED);
      break;
  }
  proto->set_path(change.path);
  for (const std::string& aspect : change.aspects)
    proto->add_aspects(aspect);
}

TreeChange tree_change_of(const v1::TreeChange& proto) {
  TreeChange change;
  change.kind = proto.kind() == v1::TreeChange::ADDED     ? TreeChange::Kind::kAdded
                : proto.kind() == v1::TreeChange::REMOVED ? TreeChange::Kind::kRemoved
                                                          : TreeChange::Kind::kChanged;
  change.path = proto.path();
  change.aspects.assign(proto.aspects().begin(), proto.aspects().end());
  return change;
}

void fill_verification(const SnapshotVerification& verification,
                       v1::VerifySnapshotsResponse* proto) {
  proto->set_snapshots(verification.snapshots);
  proto->set_objects(verification.objects);
  proto->set_bytes(verification.bytes);
  for (const std::string& problem : verification.problems)
    proto->add_problems(problem);
  for (const std::string& note : verification.notes)
    proto->add_notes(note);
  for (const std::string& name : verification.damaged)
    proto->add_damaged(name);
}

SnapshotVerification verification_of(const v1::VerifySnapshotsResponse& proto) {
  SnapshotVerification verification;
  verification.snapshots = proto.snapshots();
  verification.objects = proto.objects();
  verification.bytes = proto.bytes();
  verification.problems.assign(proto.problems().begin(), proto.problems().end());
  verification.notes.assign(proto.notes().begin(), proto.notes().end());
  verification.damaged.assign(proto.damaged().begin(), proto.damaged().end());
  return verification;
}

}  // namespace rosetctl
