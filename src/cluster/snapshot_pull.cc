// The receiving node's half of moving a snapshot between nodes.
#include "cluster/snapshot_pull.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>

#include "cluster/placed_id.h"
#include "cluster/source_node.h"
#include "core/commit_store/object_receiver.h"
#include "core/parallel_for.h"
#include "core/progress.h"
#include "core/validate.h"
#include "daemon/catalog_convert.h"
#include "daemon/grpc_status.h"

namespace rosetctl {
namespace {

constexpr auto kPullStorePatience = std::chrono::seconds(30);
// Objects asked for in one FetchObjects call: keeps each request small however big the tree.
constexpr std::size_t kFetchBatch = 1000;
// FetchObjects streams at once, each its own lane of blobs (and its own connection when the
// source is dialled directly): while one lane waits (for the source's disk, the network, or its
// blobs' writeback here), the other's bytes are hashed and written. On the 2-CPU machine of
// bench/README.md two lanes beat one, and four were no better than one (more threads fighting
// over the same two CPUs and disk).
constexpr int kLanes = 2;
// A file whose earlier version here is smaller than this travels whole: beginning its blob with
// that version costs a copy and a hash of it on each side, for little.
constexpr int64_t kMinSeedBytes = 1 << 20;

v1::ObjectRef object_ref(v1::ObjectKind kind, const std::string& id, int64_t offset = 0) {
  v1::ObjectRef ref;
  ref.set_kind(kind);
  ref.set_id(id);
  ref.set_offset(offset);
  return ref;
}

ObjectReceiver::TextKind text_kind(v1::ObjectKind kind) {
  return kind == v1::OBJECT_TREE ? ObjectReceiver::TextKind::kTree
                                 : ObjectReceiver::TextKind::kCommit;
}

// Where a record here came from, for messages.
std::string origin(const SnapshotRecord& record) {
  if (record.pulled_from.empty()) return "taken on this node";
  if (record.pulled_from == "?") return "pulled from a node not recorded";
  return fmt::format("pulled from node \"{}\"", record.pulled_from);
}

// The record this node keeps: the source's, as it was taken there. One recorded already under
// that id is the same snapshot when it names the same commit (its content, verified); one pulled
// before the node was recorded (schema 9) is then known to be this node's.
Status check_record_here(const ServiceContext& context, const SnapshotRecord& record,
                         bool* recorded) {
  auto by_id = context.store.find_snapshot(record.id);
  if (!by_id) return by_id.status();
  *recorded = by_id->has_value();
  if (*recorded && (*by_id)->commit_id != record.commit_id) {
    return error(Code::kAlreadyExists,
                 "snapshot id {} names another commit on this node ({}, {}; node \"{}\" says "
                 "{}); delete it here before pulling node \"{}\"'s",
                 record.id, (*by_id)->commit_id, origin(**by_id), record.pulled_from,
                 record.commit_id, record.pulled_from);
  }
  if (*recorded && (*by_id)->pulled_from == "?") {
    ROSETCTL_RETURN_IF_ERROR(context.store.set_snapshot_pulled_from(record.id, record.pulled_from));
  }
  auto by_name = context.store.find_snapshot_by_name(record.name);
  if (!by_name) return by_name.status();
  if (by_name->has_value() && (*by_name)->id != record.id) {
    return error(Code::kAlreadyExists,
                 "a snapshot named \"{}\" exists on this node already (id {}); delete or rename "
                 "it before pulling snapshot {}",
                 record.name, (*by_name)->id, record.id);
  }
  return Status::ok();
}

class Pull {
 public:
  Pull(const ServiceContext& context, SourceNode& source, const PullReport& report)
      : context_(context), source_(source), report_(report) {}

  // `found`: what the source answered for the snapshot asked for (SourceNode::reach).
  Expected<v1::PullSnapshotProgress> run(const std::string& reference, PullReference how,
                                         const v1::LookupSnapshotResponse& found) {
    SnapshotRecord record = snapshot_record_of(found.snapshot());
    const std::string& tree_id = found.tree_id();
    if (!record.ready || !is_digest_hex(record.commit_id) || !is_digest_hex(tree_id)) {
      return error(Code::kFailedPrecondition,
                   "node \"{}\" answered snapshot {} without a ready commit", source_.node(),
                   display_quoted(reference));
    }
    ROSETCTL_RETURN_IF_ERROR(check_answer_is_the_one_asked(record, reference, how, source_.node()));
    ROSETCTL_RETURN_IF_ERROR(check_pulled_record(record, source_.node()));
    record.pulled_from = source_.node();
    result_.set_snapshot_id(record.id);
    result_.set_snapshot_name(record.name);
    result_.set_commit_id(record.commit_id);
    result_.set_route(source_.route());

    auto store = CommitStore::open(context_.layout.commit_store_dir());
    if (!store) return store.status();
    store_ = std::move(*store);
    // Held until the commit names what arrived: garbage collection would take it before.
    auto lock = store_->lock_shared(kPullStorePatience);
    if (!lock) return lock.status();
    bool recorded = false;
    ROSETCTL_RETURN_IF_ERROR(check_record_here(context_, record, &recorded));
    if (recorded && store_->has_commit(record.commit_id)) {
      result_.set_already_present(true);
      result_.set_objects_skipped(2 + record.file_count);
      result_.set_bytes_skipped(record.size_bytes);
      return finish();
    }
    auto receiver = ObjectReceiver::open(*store_, fmt::format("node \"{}\"", source_.node()));
    if (!receiver) return receiver.status();
    receiver_.emplace(std::move(*receiver));

    auto commit = commit_and_tree(record.commit_id, tree_id);
    if (!commit) return commit.status();
    // A source that would send from the offset asked without checking the prefix gets no
    // begun blobs: each would fail its hash, again at every retry.
    ROSETCTL_RETURN_IF_ERROR(blobs(found.checks_prefix() ? earlier_versions(commit->parent)
                                                         : std::map<std::string, StoredFile>()));
    if (!store_->has_commit(record.commit_id)) {
      ROSETCTL_RETURN_IF_ERROR(receiver_->store_commit(record.commit_id, *commit));
    }
    if (!recorded) {
      record.new_bytes = result_.bytes_sent();  // what it added to this node's storage
      record.source_volume_id = volume_on_source(record.source_volume_id);
      ROSETCTL_RETURN_IF_ERROR(context_.store.insert_snapshot(record));
    }
    return finish();
  }

 private:
  // The snapshot's volume is on the source node, not here: named by its placed id there, so this
  // node's lists (and the controller's combined one) do not take it for a volume of this node.
  std::string volume_on_source(const std::string& volume_id) const {
    if (volume_id.empty() || decode_placed_id(volume_id)) return volume_id;
    auto placed = encode_placed_id(source_.node(), volume_id);
    return placed ? *placed : volume_id;
  }

  Expected<v1::PullSnapshotProgress> finish() {
    result_.set_done(true);
    ROSETCTL_RETURN_IF_ERROR(report_(result_));
    return result_;
  }

  // The commit (verified, stored last) and its tree (verified and stored now).
  Expected<CommitObject> commit_and_tree(const std::string& commit_id, const std::string& tree_id) {
    std::vector<v1::ObjectRef> wants;
    std::optional<CommitObject> commit;
    if (store_->has_commit(commit_id)) {
      auto held = store_->read_commit(commit_id);
      if (held) commit = std::move(*held);
    }
    if (commit) {
      skipped(0);
    } else {
      wants.push_back(object_ref(v1::OBJECT_COMMIT, commit_id));
    }
    auto held_tree = store_->read_tree(tree_id);
    if (held_tree) {
      tree_ = std::move(*held_tree);
      skipped(0);
    } else {
      wants.push_back(object_ref(v1::OBJECT_TREE, tree_id));
    }
    if (wants.empty()) return *commit;
    for (const v1::ObjectRef& want : wants)
      ROSETCTL_RETURN_IF_ERROR(receiver_->expect_text(text_kind(want.kind()), want.id()));
    // Each text goes to disk as it arrives (received_text.h), within its bound: a source that
    // never stops sending costs no memory here.
    ROSETCTL_RETURN_IF_ERROR(source_.fetch(0, wants, [&](const v1::ObjectChunk& chunk) -> Status {
      if (chunk.kind() != v1::OBJECT_TREE && chunk.kind() != v1::OBJECT_COMMIT) {
        return error(Code::kDataLoss,
                     "node \"{}\" sent a {} chunk where a tree or a commit was due; it was not "
                     "stored",
                     source_.node(), chunk.kind() == v1::OBJECT_BLOB ? "blob" : "malformed");
      }
      result_.set_bytes_sent(result_.bytes_sent() + static_cast<int64_t>(chunk.data().size()));
      return receiver_->text_chunk(text_kind(chunk.kind()), chunk.id(), chunk.offset(),
                                   chunk.data(), chunk.size());
    }));
    if (!commit) {
      auto arrived = receiver_->commit(commit_id);
      if (!arrived) return arrived.status();
      if (arrived->tree != tree_id) {
        return error(Code::kDataLoss, "commit {} from node \"{}\" names tree {}, not {}", commit_id,
                     source_.node(), arrived->tree, tree_id);
      }
      commit = std::move(*arrived);
      result_.set_objects_sent(result_.objects_sent() + 1);
    }
    if (!held_tree) {
      auto arrived = receiver_->tree(tree_id);
      if (!arrived) return arrived.status();
      tree_ = std::move(*arrived);
      result_.set_objects_sent(result_.objects_sent() + 1);
    }
    return *commit;
  }

  void skipped(int64_t bytes) {
    result_.set_objects_skipped(result_.objects_skipped() + 1);
    result_.set_bytes_skipped(result_.bytes_skipped() + bytes);
  }

  struct StoredFile {
    std::string blob;
    int64_t size = 0;
  };
  // The files of the snapshot's parent commit, when this store holds it (a move's earlier round,
  // a replica's previous push), by path. Only a hint: what a blob begun with one of them holds is
  // checked against its name like any other.
  std::map<std::string, StoredFile> earlier_versions(const std::string& parent) const {
    std::map<std::string, StoredFile> files;
    if (!is_digest_hex(parent) || !store_->has_commit(parent)) return files;
    auto commit = store_->read_commit(parent);
    if (!commit) return files;
    auto tree = store_->read_tree(commit->tree);
    if (!tree) return files;
    for (const TreeEntry& entry : tree->entries) {
      if (entry.type == EntryType::kRegular && entry.size >= kMinSeedBytes)
        files.emplace(entry.path, StoredFile{entry.content, entry.size});
    }
    return files;
  }

  // The earlier version held here of the file at `path`, when the file (now `size` bytes) may
  // have been appended to since.
  const StoredFile* earlier_version_of(const std::map<std::string, StoredFile>& earlier,
                                       const std::string& path, int64_t size) const {
    auto found = earlier.find(path);
    if (found == earlier.end() || found->second.size >= size ||
        !store_->has_blob(found->second.blob)) {
      return nullptr;
    }
    return &found->second;
  }

  // Every blob the tree names that this store lacks, resumed where a part is staged (or begun
  // with the file's earlier version), on the source's lanes side by side.
  Status blobs(const std::map<std::string, StoredFile>& earlier) {
    std::map<std::string, int64_t>& sizes = blob_sizes_;
    std::map<std::string, std::string> paths;  // a path of each blob, when there are versions
    for (const TreeEntry& entry : tree_.entries) {
      if (entry.type == EntryType::kRegular && !entry.content.empty()) {
        sizes.emplace(entry.content, entry.size);
        if (!earlier.empty()) paths.emplace(entry.content, entry.path);
      }
    }
    std::vector<Want> wants;
    for (const auto& [id, size] : sizes) {
      if (store_->has_blob(id)) {
        skipped(size);
        continue;
      }
      // A part longer than the blob is none of its (a source once sent more than it holds):
      // the blob starts over, which overwrites it.
      int64_t kept = receiver_->partial_size(id);
      if (kept > size) kept = 0;
      v1::ObjectRef ref = object_ref(v1::OBJECT_BLOB, id, kept);
      const StoredFile* base =
          kept == 0 && !earlier.empty() ? earlier_version_of(earlier, paths.at(id), size) : nullptr;
      if (base != nullptr) {
        auto seeded = receiver_->seed_part(id, base->blob);
        if (!seeded) return seeded.status();
        if (*seeded > 0) {
          ref.set_offset(*seeded);
          ref.set_prefix_sha256(base->blob);
          result_.set_bytes_seeded(result_.bytes_seeded() + *seeded);
          seeded_.emplace(id, *seeded);
          kept = *seeded;
        }
      }
      wants.push_back({ref, size - kept});
      if (ref.prefix_sha256().empty()) result_.set_bytes_resumed(result_.bytes_resumed() + kept);
      result_.set_files_total(result_.files_total() + 1);
      result_.set_bytes_total(result_.bytes_total() + size - kept);
    }
    ROSETCTL_RETURN_IF_ERROR(report_(result_));
    std::vector<std::vector<v1::ObjectRef>> lanes = into_lanes(std::move(wants), source_.lanes());
    Status fetched = parallel_for(lanes.size(), static_cast<int>(lanes.size()),
                                  [&](std::size_t lane, int) -> Status {
                                    Status done = fetch_lane(static_cast<int>(lane), lanes[lane]);
                                    if (!done) stop(done);
                                    return done;
                                  });
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failure_.is_ok()) return failure_;  // the first lane's failure, not a lane stopped
    }
    ROSETCTL_RETURN_IF_ERROR(fetched);
    for (const auto& lane : lanes) {
      for (const v1::ObjectRef& want : lane) {
        if (!store_->has_blob(want.id())) {
          return error(Code::kUnavailable,
                       "node \"{}\" ended the transfer before blob {} arrived; retry to resume",
                       source_.node(), want.id());
        }
      }
    }
    return store_->sync_blob_names(arrived_, 4);
  }

  struct Want {
    v1::ObjectRef ref;
    int64_t bytes = 0;  // still to come
  };

  // The biggest first, each to the lane with the fewest bytes so far: lanes that end together.
  static std::vector<std::vector<v1::ObjectRef>> into_lanes(std::vector<Want> wants, int count) {
    std::size_t lanes = std::min<std::size_t>(static_cast<std::size_t>(std::max(count, 1)),
                                              std::max<std::size_t>(wants.size(), 1));
    std::stable_sort(wants.begin(), wants.end(),
                     [](const Want& a, const Want& b) { return a.bytes > b.bytes; });
    std::vector<std::vector<v1::ObjectRef>> split(lanes);
    std::vector<int64_t> bytes(lanes, 0);
    for (Want& want : wants) {
      std::size_t lightest =
          static_cast<std::size_t>(std::min_element(bytes.begin(), bytes.end()) - bytes.begin());
      bytes[lightest] += want.bytes;
      split[lightest].push_back(std::move(want.ref));
    }
    return split;
  }

  // One lane's blobs, in calls of kFetchBatch, through a receiver of its own. Every blob
  // verified is stored, even when the lane stops halfway: a retry skips it.
  Status fetch_lane(int lane, const std::vector<v1::ObjectRef>& wants) {
    auto receiver = ObjectReceiver::open(*store_, fmt::format("node \"{}\"", source_.node()));
    if (!receiver) return receiver.status();
    for (std::size_t first = 0; first < wants.size(); first += kFetchBatch) {
      std::vector<v1::ObjectRef> batch(
          wants.begin() + static_cast<std::ptrdiff_t>(first),
          wants.begin() + static_cast<std::ptrdiff_t>(std::min(wants.size(), first + kFetchBatch)));
      // Only these blobs, each no bigger than the tree says, are taken from this call's stream.
      for (const v1::ObjectRef& want : batch)
        receiver->expect_blob(want.id(), blob_sizes_.at(want.id()));
      Status fetched = source_.fetch(lane, batch, [&](const v1::ObjectChunk& chunk) -> Status {
        if (stopped_.load(std::memory_order_relaxed)) {
          return error(Code::kAborted, "stopped: another of the pull's lanes failed");
        }
        if (chunk.kind() != v1::OBJECT_BLOB) {
          return error(Code::kDataLoss, "node \"{}\" sent a {} where a blob was due",
                       source_.node(), v1::ObjectKind_Name(chunk.kind()));
        }
        auto complete =
            receiver->blob_chunk(chunk.id(), chunk.offset(), chunk.data(), chunk.size());
        if (!complete) return complete.status();
        int64_t bytes = static_cast<int64_t>(chunk.data().size());
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto begun = seeded_.find(chunk.id()); begun != seeded_.end() && chunk.offset() == 0) {
          // The file was not appended to: the source started it over, and it travels whole.
          result_.set_bytes_seeded(result_.bytes_seeded() - begun->second);
          seeded_.erase(begun);
        }
        result_.set_bytes_sent(result_.bytes_sent() + bytes);
        result_.set_bytes_done(result_.bytes_done() + bytes);
        if (*complete) {
          arrived_.push_back(chunk.id());
          result_.set_objects_sent(result_.objects_sent() + 1);
          result_.set_files_done(result_.files_done() + 1);
        }
        return report_(result_);
      });
      Status flushed = receiver->flush();
      ROSETCTL_RETURN_IF_ERROR(fetched);
      ROSETCTL_RETURN_IF_ERROR(flushed);
    }
    return Status::ok();
  }

  // A lane failed: the others stop at their next chunk, and the first failure is the answer.
  void stop(const Status& failure) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.is_ok() && !stopped_.load()) failure_ = failure;
    stopped_.store(true);
  }

  const ServiceContext& context_;
  SourceNode& source_;
  const PullReport& report_;
  std::unique_ptr<CommitStore> store_;
  std::optional<ObjectReceiver> receiver_;
  Tree tree_;
  std::map<std::string, int64_t> blob_sizes_;  // every blob the tree names, with its size
  std::map<std::string, int64_t> seeded_;      // blobs begun with an earlier version; guarded
  std::atomic<bool> stopped_{false};           // a lane failed: the others stop
  std::mutex mutex_;
  Status failure_;                    // the first lane's failure; guarded by mutex_
  std::vector<std::string> arrived_;  // blobs stored; guarded by mutex_ while lanes run
  v1::PullSnapshotProgress result_;   // guarded by mutex_ while lanes run (report_ too)
};

}  // namespace

Expected<v1::PullSnapshotProgress> pull_snapshot(const ServiceContext& context,
                                                 const std::string& from_node,
                                                 const std::string& reference, PullReference how,
                                                 const PullReport& report) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(from_node, "from_node_id"));
  if (reference.empty()) return error(Code::kInvalidArgument, "no snapshot named to pull");
  if (from_node == context.options.node_id) {
    return error(Code::kInvalidArgument,
                 "node \"{}\" is this node: a snapshot is pulled from another node", from_node);
  }
  // A node asks its controller where the source is; the controller itself (serve --listen with
  // its certificate, no --controller) reads its own registry and dials the node directly.
  if (!context.options.controller_channel && !context.options.node_credentials) {
    return error(Code::kUnavailable,
                 "node \"{}\" is found through the controller's registry, and this host has no "
                 "controller (serve --controller, or the CLI's --controller), nor, as the "
                 "controller, a certificate to dial the node with (serve --listen with "
                 "--tls-cert, --tls-key and --tls-ca)",
                 from_node);
  }
  v1::LookupSnapshotResponse found;
  auto source = SourceNode::reach(context, from_node, reference, kLanes, &found);
  if (!source) return source.status();
  Pull pull(context, *source, report);
  return pull.run(reference, how, found);
}

void prepare_restore_here(const ServiceContext& context, const std::string& commit_id) {
  auto prepared = [&]() -> Status {
    auto provider = context.providers.by_name("local");
    if (!provider) return provider.status();
    auto snapshots = snapshot_side(**provider);
    if (!snapshots) return snapshots.status();
    return (*snapshots)->prepare_restore(commit_id, true);
  }();
  if (!prepared) {
    spdlog::warn(
        "commit {} was not restored ahead (a volume made from it will be copied whole): {}",
        commit_id, escape_text(prepared.message()));
  }
}

Expected<v1::PullSnapshotProgress> fetch_snapshot_from_node(const ServiceContext& context,
                                                            const std::string& node_id,
                                                            const std::string& snapshot_id) {
  Progress progress(context.options.progress);
  bool started = false;
  int64_t files = 0;
  int64_t bytes = 0;
  auto pulled =
      pull_snapshot(context, node_id, snapshot_id, PullReference::kSnapshotId,
                    [&](const v1::PullSnapshotProgress& now) -> Status {
                      if (!started && now.files_total() > 0) {
                        progress.start(fmt::format("fetching from {}", node_id), now.files_total(),
                                       now.bytes_total());
                        started = true;
                      }
                      progress.advance(now.files_done() - files, now.bytes_done() - bytes);
                      files = now.files_done();
                      bytes = now.bytes_done();
                      return Status::ok();
                    });
  if (started) progress.finish();
  return pulled;
}

}  // namespace rosetctl
