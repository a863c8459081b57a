// Checking and locking the source of a restore or clone.
#include "daemon/content_source.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster/placed_id.h"
#include "cluster/snapshot_pull.h"
#include "core/commit_store/commit_store.h"
#include "core/validate.h"
#include "daemon/convert.h"
#include "daemon/snapshot_locks.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"

namespace rosetctl {
namespace {

Status check_capacity(std::string_view what, int64_t needed, int64_t required, int64_t limit) {
  if (required > 0 && required < needed) {
    return error(Code::kOutOfRange,
                 "capacity_range.required_bytes {} is smaller than {} ({} bytes); request at "
                 "least that much",
                 required, what, needed);
  }
  if (limit > 0 && limit < needed) {
    return error(Code::kOutOfRange, "capacity_range.limit_bytes {} is smaller than {} ({} bytes)",
                 limit, what, needed);
  }
  return Status::ok();
}

// Whether this node holds node `node`'s snapshot `id` whole: a ready record of that id that was
// taken here or pulled from `node` (SnapshotRecord::pulled_from), its commit in this node's store.
//
// Such a record IS the snapshot another node's placed id names by that local id, so it restores
// without asking that node: a snapshot id is made once, by the node that takes the snapshot (its
// creation time to the nanosecond and 32 random bits, or a commit id, which names the content
// itself), and a pull from that node copies it unchanged with its name and commit
// (snapshot_pull.h), only when that node answered with that very id (pulled_snapshot.h), the
// record written only once every object is stored. A record pulled from another node proves
// nothing about `node`'s snapshot of the same id: that other node could have answered with any
// id and its own content. So `node` is asked then (a pull of what is here already fetches
// nothing, and ALREADY_EXISTS when the commits differ). The name is not compared: only the
// source node could say it, and asking is what this avoids. The commit's content is verified as
// it is restored, as for any local snapshot.
Expected<bool> held_here(const ServiceContext& context, const std::string& node,
                         const std::string& id) {
  auto snapshot = context.store.find_snapshot(id);
  if (!snapshot) return snapshot.status();
  if (!snapshot->has_value() || !(*snapshot)->ready) return false;
  const std::string& from = (*snapshot)->pulled_from;
  if (!from.empty() && from != node) {
    spdlog::info("snapshot {} here was {} (\"{}\"), not from node \"{}\": asking node \"{}\"", id,
                 from == "?" ? "pulled from a node not recorded" : "pulled from another node", from,
                 node, node);
    return false;
  }
  auto store = CommitStore::open(context.layout.commit_store_dir());
  if (!store) return store.status();
  return (*store)->has_commit((*snapshot)->commit_id);
}

// A snapshot another node holds (its placed id names that node; this node's own placed ids were
// made local by the interceptor already): fetched here first, only the objects this node lacks,
// and recorded as this node's snapshot under the same local id, name and commit (docs/guides/
// across-hosts.md, "Moving snapshots between nodes"); then it restores as any local one. A retry
// resumes a broken fetch. A snapshot this node holds whole already (fetched before) is restored
// from this node's copy without contacting its node at all: a create here then works while that
// node is down, and after its snapshot there was deleted (the copy here is as good;
// docs/guides/across-hosts.md). Returns the id to restore here.
Expected<std::string> fetch_if_elsewhere(const ServiceContext& context, const std::string& id) {
  auto placed = decode_placed_id(id);
  if (!placed) return id;
  if (placed->node == context.options.node_id) return placed->local_id;
  auto held = held_here(context, placed->node, placed->local_id);
  if (!held) return held.status();
  if (*held) {
    spdlog::info(
        "snapshot {} of node \"{}\" is held whole on this node: restored from this "
        "node's copy, node \"{}\" not asked",
        placed->local_id, placed->node, placed->node);
    return placed->local_id;
  }
  // One fetch of a snapshot at a time: a second create from it waits its turn (ABORTED) rather
  // than receiving the same objects beside the first.
  auto lock = context.locks.try_lock(
      snapshot_lock_key(placed->local_id), LockMode::kExclusive,
      busy_message(fmt::format("snapshot {} (being fetched from node \"{}\")", placed->local_id,
                               placed->node)));
  if (!lock) return lock.status();
  auto fetched = fetch_snapshot_from_node(context, placed->node, placed->local_id);
  if (!fetched) {
    return fetched.status().with_context(fmt::format("volume_content_source: snapshot {}", id));
  }
  // What travelled, for the operator (and the tests): a repeated fetch moves only changes.
  spdlog::info(
      "snapshot {} fetched from node \"{}\" for a restore: objects_sent={} bytes_sent={} "
      "objects_skipped={} bytes_skipped={} bytes_resumed={} already_present={}",
      placed->local_id, placed->node, fetched->objects_sent(), fetched->bytes_sent(),
      fetched->objects_skipped(), fetched->bytes_skipped(), fetched->bytes_resumed(),
      fetched->already_present());
  return placed->local_id;
}

// `of_volume`: when the snapshot stands in for a volume (a clone across nodes), the volume it
// must have been taken of.
Expected<ResolvedSource> resolve_snapshot(const ServiceContext& context,
                                          const std::string& requested, const Provider& provider,
                                          int64_t required, int64_t limit,
                                          std::string_view of_volume = {}) {
  auto here = fetch_if_elsewhere(context, requested);
  if (!here) return here.status();
  const std::string& id = *here;
  auto lock = context.locks.try_lock(snapshot_lock_key(id), LockMode::kShared,
                                     busy_message(fmt::format("snapshot {}", id)));
  if (!lock) return lock.status();
  auto snapshot = context.store.find_snapshot(id);
  if (!snapshot) return snapshot.status();
  if (!snapshot->has_value()) {
    return error(Code::kNotFound, "volume_content_source: snapshot {} does not exist", id);
  }
  if (!(*snapshot)->ready) {
    return error(Code::kFailedPrecondition,
                 "volume_content_source: snapshot {} is not ready yet; restore it once "
                 "ListSnapshots reports ready_to_use",
                 id);
  }
  if (!of_volume.empty() && (*snapshot)->source_volume_id != of_volume) {
    return error(Code::kInvalidArgument,
                 "volume_content_source: snapshot {} was taken of volume \"{}\", not of \"{}\" "
                 "which is to be cloned",
                 requested, (*snapshot)->source_volume_id, of_volume);
  }
  if ((*snapshot)->provider != provider.name()) {
    return error(Code::kInvalidArgument,
                 "snapshot {} belongs to provider \"{}\"; it can only be restored there", id,
                 (*snapshot)->provider);
  }
  int64_t needed = restore_size_bytes(**snapshot);
  ROSETCTL_RETURN_IF_ERROR(check_capacity(fmt::format("snapshot {}", id), needed, required, limit));
  // A restore without a size gets its source's; a source that had none (0: unknown) passes
  // that on, as it would to a clone.
  int64_t capacity = (*snapshot)->source_capacity_bytes > 0 ? needed : 0;
  // A snapshot pulled from another node says which (snapshot_pull.cc); "?" for one pulled before
  // records said so, which is no more this host's own.
  bool from_another_host = !(*snapshot)->pulled_from.empty();
  return ResolvedSource{{VolumeSource::Kind::kSnapshot, (*snapshot)->commit_id, from_another_host},
                        capacity,
                        std::move(*lock)};
}

// A clone copies a volume in place. A volume of another node is copied by way of a snapshot of
// it there: the controller takes one and names it (`clone_by`, kCloneBySnapshotKey); it is
// fetched and restored as a restore from it would be, and the volume is recorded as a clone of
// the volume (cluster/cross_node_clone.cc).
Expected<ResolvedSource> resolve_volume(const ServiceContext& context, const std::string& id,
                                        const Provider& provider, int64_t required, int64_t limit,
                                        const std::string& clone_by) {
  if (auto placed = decode_placed_id(id); placed && placed->node != context.options.node_id) {
    auto snapshot = decode_placed_id(clone_by);
    if (!snapshot) {
      return error(Code::kFailedPrecondition,
                   "volume_content_source: volume {} lives on node \"{}\", not on this node "
                   "(\"{}\"); a clone across nodes is made through the controller, which "
                   "snapshots the volume there first (rosetctl --controller ... volume create "
                   "NAME --node {} --from-volume {})",
                   id, placed->node, context.options.node_id, context.options.node_id, id);
    }
    if (snapshot->node != placed->node) {
      return error(Code::kInvalidArgument,
                   "volume_content_source: volume {} lives on node \"{}\" but the snapshot to "
                   "clone it by, {}, on node \"{}\"",
                   id, placed->node, clone_by, snapshot->node);
    }
    auto resolved = resolve_snapshot(context, clone_by, provider, required, limit, id);
    if (!resolved) {
      return resolved.status().with_context(
          fmt::format("cloning volume {} by way of its snapshot {}", id, clone_by));
    }
    return resolved;
  }
  auto lock = try_lock_volume(context.locks, id, LockMode::kShared);
  if (!lock) return lock.status();
  auto volume = load_volume(context, id);
  if (!volume) {
    if (volume.status().code() != Code::kNotFound) return volume.status();
    return error(Code::kNotFound, "volume_content_source: volume \"{}\" does not exist", id);
  }
  if (volume->provider != &provider) {
    return error(Code::kInvalidArgument,
                 "volume \"{}\" belongs to provider \"{}\"; it can only be cloned there", id,
                 volume->record.provider);
  }
  ROSETCTL_RETURN_IF_ERROR(check_capacity(fmt::format("volume \"{}\"", volume->record.name),
                                          volume->record.capacity_bytes, required, limit));
  return ResolvedSource{
      {VolumeSource::Kind::kVolume, id}, volume->record.capacity_bytes, std::move(*lock)};
}

}  // namespace

int64_t restore_size_bytes(const SnapshotRecord& snapshot) {
  return std::max(snapshot.size_bytes, snapshot.source_capacity_bytes);
}

Expected<std::string> content_source_key(const csi::v1::CreateVolumeRequest& request) {
  if (!request.has_volume_content_source()) return std::string();
  const csi::v1::VolumeContentSource& source = request.volume_content_source();
  if (source.has_snapshot()) {
    ROSETCTL_RETURN_IF_ERROR(
        validate_id(source.snapshot().snapshot_id(), "volume_content_source.snapshot.snapshot_id"));
    return fmt::format("{}{}", kContentSourceSnapshot, source.snapshot().snapshot_id());
  }
  if (source.has_volume()) {
    ROSETCTL_RETURN_IF_ERROR(
        validate_id(source.volume().volume_id(), "volume_content_source.volume.volume_id"));
    return fmt::format("{}{}", kContentSourceVolume, source.volume().volume_id());
  }
  return error(Code::kInvalidArgument,
               "volume_content_source names neither a snapshot nor a volume");
}

Expected<ResolvedSource> resolve_content_source(const ServiceContext& context,
                                                const csi::v1::CreateVolumeRequest& request,
                                                const Provider& provider, int64_t required_bytes,
                                                int64_t limit_bytes, const std::string& clone_by) {
  if (!request.has_volume_content_source()) return ResolvedSource{};
  const csi::v1::VolumeContentSource& source = request.volume_content_source();
  if (source.has_snapshot()) {
    return resolve_snapshot(context, source.snapshot().snapshot_id(), provider, required_bytes,
                            limit_bytes);
  }
  return resolve_volume(context, source.volume().volume_id(), provider, required_bytes, limit_bytes,
                        clone_by);
}

}  // namespace rosetctl
