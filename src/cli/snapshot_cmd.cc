// Snapshot verbs that are CSI calls: commit (CreateSnapshot), list (ListSnapshots), show,
// restore (CreateVolume from a snapshot) and delete (DeleteSnapshot). Details CSI does not carry
// (message, file counts, new bytes) come from the snapshot records in this host's state store.
#include "cli/snapshot_cmd.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/snapshot_lookup.h"
#include "cli/snapshot_view.h"
#include "cli/volume_cmd.h"
#include "cli/volume_lookup.h"
#include "cli/volume_view.h"
#include "core/random_id.h"
#include "core/size.h"
#include "core/validate.h"
#include "daemon/catalog_convert.h"
#include "daemon/convert.h"

namespace rosetctl::cli {
namespace {

constexpr std::chrono::milliseconds kReadyPoll{100};

struct CommitOptions {
  std::string volume;
  std::string message;
  std::string name;
};

struct SnapshotOptions {
  std::string snapshot;
  std::string volume;      // list --volume
  std::string name;        // restore --name
  std::string node;        // restore --node: the node to make the volume on
  bool read_only = false;  // restore --read-only
  std::optional<std::string> size;
};

// "<volume>-<8 hex>": unique, so two commits never collide on the CSI name by accident.
std::string default_snapshot_name(const std::string& volume) {
  return fmt::format("{}-{}", volume.substr(0, 110), random_hex(4));
}

// The controller's records of these snapshots (what CSI's Snapshot does not carry), oldest
// first; NOT_FOUND naming the first it has none of.
Expected<std::vector<SnapshotRecord>> recorded(Session& session,
                                               const std::vector<std::string>& ids) {
  v1::ListSnapshotDetailsRequest request;
  for (const std::string& id : ids)
    request.add_snapshot_ids(id);
  v1::ListSnapshotDetailsResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      session.client().catalog(&v1::Catalog::Stub::ListSnapshotDetails, request, &response));
  std::vector<SnapshotRecord> records;
  for (const v1::SnapshotDetails& details : response.snapshots())
    records.push_back(snapshot_record_of(details));
  for (const std::string& id : ids) {
    bool found = std::any_of(records.begin(), records.end(),
                             [&](const SnapshotRecord& record) { return record.id == id; });
    if (!found) return error(Code::kNotFound, "snapshot {} has no record where it lives", id);
  }
  return records;
}

Expected<SnapshotRecord> recorded(Session& session, const std::string& id) {
  auto records = recorded(session, std::vector<std::string>{id});
  if (!records) return records.status();
  return std::move(records->front());
}

// Every snapshot through ListSnapshots, optionally of one volume.
Expected<std::vector<csi::v1::Snapshot>> list_all_snapshots(CsiClient& client,
                                                            const std::string& volume_id) {
  std::vector<csi::v1::Snapshot> out;
  csi::v1::ListSnapshotsRequest request;
  request.set_max_entries(500);
  request.set_source_volume_id(volume_id);
  do {
    csi::v1::ListSnapshotsResponse response;
    ROSETCTL_RETURN_IF_ERROR(
        client.controller(&csi::v1::Controller::Stub::ListSnapshots, request, &response));
    for (const auto& entry : response.entries())
      out.push_back(entry.snapshot());
    request.set_starting_token(response.next_token());
  } while (!request.starting_token().empty());
  return out;
}

Status run_commit(const GlobalOptions& globals, const CommitOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto volume = resolve_volume(**session, options.volume);
  if (!volume) return volume.status();
  csi::v1::CreateSnapshotRequest request;
  request.set_source_volume_id(volume->volume.volume_id());
  request.set_name(options.name.empty() ? default_snapshot_name(volume_name(volume->volume))
                                        : options.name);
  if (!options.message.empty()) (*request.mutable_parameters())["message"] = options.message;
  // CreateSnapshot answers ready_to_use=false for a commit that takes a while; asking again
  // with the same name is how to wait for it (and how its failure, if any, arrives).
  csi::v1::CreateSnapshotResponse response;
  while (true) {
    ROSETCTL_RETURN_IF_ERROR(
        (*session)->client().controller(&csi::v1::Controller::Stub::CreateSnapshot, request,
                                        &response, CsiClient::kDataCallDeadline));
    if (response.snapshot().ready_to_use()) break;
    std::this_thread::sleep_for(kReadyPoll);
  }
  auto record = recorded(**session, response.snapshot().snapshot_id());
  if (!record) return record.status();
  print_line_or_json(globals.output, record->commit_id, snapshot_json(*record));
  return Status::ok();
}

// The volume id to filter by: a live volume's, or one recorded in snapshots of a deleted volume
// (by name or id).
Expected<std::string> volume_filter(Session& session, const std::string& volume) {
  if (volume.empty()) return std::string();
  auto live = resolve_volume(session, volume);
  if (live) return live->volume.volume_id();
  if (live.status().code() != Code::kNotFound) return live.status();
  v1::ListSnapshotDetailsResponse all;
  ROSETCTL_RETURN_IF_ERROR(session.client().catalog(&v1::Catalog::Stub::ListSnapshotDetails,
                                                    v1::ListSnapshotDetailsRequest(), &all));
  for (const v1::SnapshotDetails& record : all.snapshots()) {
    if (record.source_volume_id() == volume || record.source_volume_name() == volume) {
      return record.source_volume_id();
    }
  }
  return with_only_this_host_hint(session, error(Code::kNotFound,
                                                 "no volume is named \"{}\" or has that id, and "
                                                 "no snapshot was taken of one",
                                                 volume));
}

Status run_list(const GlobalOptions& globals, const SnapshotOptions& options) {
  if (!state_exists(globals)) {  // read-only: no state yet is an empty list, nothing is created
    if (!options.volume.empty()) return no_state(globals, options.volume);
    print_list(globals.output, nlohmann::json::array(), snapshot_columns());
    return Status::ok();
  }
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto volume_id = volume_filter(**session, options.volume);
  if (!volume_id) return volume_id.status();
  auto snapshots = list_all_snapshots((*session)->client(), *volume_id);
  if (!snapshots) return snapshots.status();
  // The records give what CSI does not carry; ListSnapshots has settled their state already.
  std::vector<std::string> ids;
  for (const csi::v1::Snapshot& snapshot : *snapshots)
    ids.push_back(snapshot.snapshot_id());
  nlohmann::json items = nlohmann::json::array();
  if (!ids.empty()) {
    auto rows = recorded(**session, ids);
    if (!rows) return rows.status();
    for (const SnapshotRecord& record : *rows)
      items.push_back(snapshot_json(record));
  }
  print_list(globals.output, items, snapshot_columns());
  note_only_this_host(**session);
  return Status::ok();
}

// The record after ListSnapshots has looked at it (a commit whose process ended is settled).
Expected<SnapshotRecord> settled(Session& session, const std::string& id) {
  csi::v1::ListSnapshotsRequest request;
  request.set_snapshot_id(id);
  csi::v1::ListSnapshotsResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      session.client().controller(&csi::v1::Controller::Stub::ListSnapshots, request, &response));
  return recorded(session, id);
}

Status run_show(const GlobalOptions& globals, const SnapshotOptions& options) {
  if (!state_exists(globals)) return no_snapshot_state(globals, options.snapshot);
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto record = resolve_snapshot(**session, options.snapshot);
  if (!record) return record.status();
  auto now = settled(**session, record->id);
  if (!now) return now.status();
  print_object(globals.output, snapshot_json(*now), snapshot_fields());
  return Status::ok();
}

Status run_restore(const GlobalOptions& globals, const SnapshotOptions& options) {
  if (!options.node.empty()) ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.node, "--node"));
  auto session = Session::open(globals);
  if (!session) return session.status();
  // The snapshot's own place decides where the volume is made (the controller places a restore
  // of a node's snapshot on that node); --node names another, or one of several copies.
  auto record = resolve_snapshot_to_restore(**session, options.snapshot, options.node);
  if (!record) return record.status();
  csi::v1::CreateVolumeRequest request;
  request.set_name(options.name);
  if (!options.node.empty()) {
    auto* requirement = request.mutable_accessibility_requirements();
    (*requirement->add_requisite()->mutable_segments())[kTopologyNodeKey] = options.node;
    *requirement->add_preferred() = requirement->requisite(0);
  }
  if (options.size) {
    auto bytes = parse_size(*options.size);
    if (!bytes) return bytes.status();
    request.mutable_capacity_range()->set_required_bytes(*bytes);
  }
  // The new volume is the kind its snapshot holds (a directory, an image with its filesystem,
  // or a raw block volume); only block access has to be asked for.
  auto* capability = request.add_volume_capabilities();
  if (is_block_snapshot(*record)) {
    capability->mutable_block();
  } else {
    capability->mutable_mount();
  }
  capability->mutable_access_mode()->set_mode(
      options.read_only ? csi::v1::VolumeCapability::AccessMode::MULTI_NODE_READER_ONLY
                        : csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  request.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(record->id);
  csi::v1::CreateVolumeResponse response;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().controller(
      &csi::v1::Controller::Stub::CreateVolume, request, &response, CsiClient::kDataCallDeadline));
  auto info = resolve_volume(**session, response.volume().volume_id());
  if (!info) return info.status();
  auto described = describe_volume(**session, *info);
  if (!described) return described.status();
  print_object(globals.output, *described, volume_fields());
  return Status::ok();
}

Status run_delete(const GlobalOptions& globals, const SnapshotOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto record = resolve_snapshot(**session, options.snapshot);
  if (!record) {
    // Deleting what is not there is done already: the answer DeleteSnapshot gives too. A name
    // of several snapshots (copies on several nodes) is no such thing.
    if (record.status().code() != Code::kNotFound || is_ambiguous_name(record.status()))
      return record.status();
    print_line_or_json(globals.output, nothing_to_delete(**session, "snapshot", options.snapshot),
                       {{"id", nullptr}, {"name", options.snapshot}, {"deleted", false}});
    return Status::ok();
  }
  csi::v1::DeleteSnapshotRequest request;
  request.set_snapshot_id(record->id);
  csi::v1::DeleteSnapshotResponse response;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().controller(
      &csi::v1::Controller::Stub::DeleteSnapshot, request, &response));
  print_line_or_json(globals.output,
                     fmt::format("deleted snapshot {} (\"{}\")", record->id, record->name),
                     {{"id", record->id}, {"name", record->name}, {"deleted", true}});
  return Status::ok();
}

void add_snapshot_argument(CLI::App* command, SnapshotOptions* options) {
  command
      ->add_option("snapshot", options->snapshot,
                   "Snapshot: commit id, a unique prefix of one (4+ hex digits), snapshot id "
                   "(snap-...), or name")
      ->required();
}

template <typename Options, typename Run>
void on_run(CLI::App* command, const GlobalOptions& globals, Action& action,
            std::shared_ptr<Options> options, Run run) {
  command->callback([&globals, &action, options, run] {
    action = [&globals, options, run] { return run(globals, *options); };
  });
}

}  // namespace

void setup_snapshot(CLI::App& app, const GlobalOptions& globals, Action& action) {
  CLI::App* snapshot =
      app.add_subcommand("snapshot", "Commit volumes, list, compare and restore their snapshots");
  snapshot->require_subcommand(1);
  snapshot->footer(
      "A snapshot is a commit: the volume's files stored once by content (SHA-256), a manifest,\n"
      "and a commit id that hashes the manifest with the volume, parent, time and message.\n"
      "Unchanged files cost neither time nor space on the next commit. An image or block\n"
      "volume's commit stores its whole image as one such file (a reflink where the filesystem\n"
      "allows, else a sparse copy). Each snapshot also has a snapshot id (snap-...), its CSI\n"
      "id, given out before the commit is complete.");

  auto commit_options = std::make_shared<CommitOptions>();
  CLI::App* commit = snapshot->add_subcommand("commit", "Record a volume's content as a commit");
  commit->add_option("volume", commit_options->volume, "Volume name or id")->required();
  commit->add_option("--message,-m", commit_options->message, "What this commit is");
  commit->add_option("--name", commit_options->name,
                     "Snapshot name, the idempotency key (default: <volume>-<random>)");
  commit->footer(
      "Prints the commit id. A connected directory volume is read file by file: each file is\n"
      "captured as one version of itself (a file that keeps changing fails the commit with exit\n"
      "code 6); for a point in time across files, disconnect the volume or pause its writers.\n"
      "A connected image volume's filesystem is frozen (FIFREEZE) while its image is copied, so\n"
      "the commit is one point in time; writers wait meanwhile. A connected block volume is\n"
      "flushed, not frozen: pause its writers for a point in time.");
  on_run(commit, globals, action, commit_options, run_commit);

  auto list_options = std::make_shared<SnapshotOptions>();
  CLI::App* list = snapshot->add_subcommand("list", "List snapshots, oldest first");
  list->add_option("--volume", list_options->volume,
                   "Only snapshots of this volume (name or id; deleted volumes too)");
  on_run(list, globals, action, list_options, run_list);

  auto show_options = std::make_shared<SnapshotOptions>();
  CLI::App* show = snapshot->add_subcommand("show", "Show one snapshot");
  add_snapshot_argument(show, show_options.get());
  on_run(show, globals, action, show_options, run_show);

  auto restore_options = std::make_shared<SnapshotOptions>();
  CLI::App* restore =
      snapshot->add_subcommand("restore", "Create a new volume with a snapshot's content");
  add_snapshot_argument(restore, restore_options.get());
  restore->add_option("--name", restore_options->name, "Name of the new volume")->required();
  restore->add_flag("--read-only", restore_options->read_only,
                    "A read-only volume (roset: the only kind a commit can be restored as)");
  restore->add_option("--size,-s", restore_options->size,
                      "Requested size (at least the snapshot's size, which is the default)");
  restore->add_option("--node", restore_options->node,
                      "Make the volume on this registered node (with --controller; default: where "
                      "the snapshot is). Its own copy of the snapshot is used when it holds one; "
                      "else it fetches what it lacks");
  restore->footer(
      "The new volume is the kind the snapshot holds: a directory volume, an image volume with\n"
      "the same filesystem, or a raw block volume, of the snapshot's size or more. It is made\n"
      "where the snapshot is: a snapshot of a node (taken there, or pulled there) is restored\n"
      "on that node. A name with copies on several nodes is refused (exit 3) naming each copy's\n"
      "id: give the id, or --node.");
  on_run(restore, globals, action, restore_options, run_restore);

  auto delete_options = std::make_shared<SnapshotOptions>();
  CLI::App* remove = snapshot->add_subcommand("delete", "Delete a snapshot");
  add_snapshot_argument(remove, delete_options.get());
  remove->footer(
      "Storage is reclaimed once no other snapshot needs it. Volumes restored from the snapshot\n"
      "are independent copies and stay.");
  on_run(remove, globals, action, delete_options, run_delete);

  setup_snapshot_store(*snapshot, globals, action);
  setup_snapshot_move(*snapshot, globals, action);
}

}  // namespace rosetctl::cli
