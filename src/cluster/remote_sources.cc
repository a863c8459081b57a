// Content sources another node holds (remote_sources.h): pulled here, or cloned by a snapshot.
#include "cluster/remote_sources.h"

#include <spdlog/spdlog.h>

#include "cluster/placed_id.h"
#include "cluster/snapshot_pull.h"
#include "core/commit_store/commit_store.h"
#include "daemon/service_context.h"
#include "daemon/snapshot_locks.h"
#include "daemon/volume_locks.h"

namespace rosetctl {
namespace {

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

}  // namespace

bool PlacedSources::names_a_host(std::string_view id) const {
  return decode_placed_id(id).has_value();
}

// A snapshot another node holds (its placed id names that node; this node's own placed ids were
// made local by the interceptor already): fetched here first, only the objects this node lacks,
// and recorded as this node's snapshot under the same local id, name and commit (docs/guides/
// across-hosts.md, "Moving snapshots between nodes"); then it restores as any local one. A retry
// resumes a broken fetch. A snapshot this node holds whole already (fetched before) is restored
// from this node's copy without contacting its node at all: a create here then works while that
// node is down, and after its snapshot there was deleted (the copy here is as good;
// docs/guides/across-hosts.md). Returns the id to restore here.
Expected<std::string> PlacedSources::snapshot_here(const ServiceContext& context,
                                                   const std::string& id) const {
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

Expected<std::optional<std::string>> PlacedSources::clone_by_snapshot(
    const ServiceContext& context, const std::string& id, const std::string& clone_by) const {
  auto placed = decode_placed_id(id);
  if (!placed || placed->node == context.options.node_id) return std::optional<std::string>();
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
  return std::optional<std::string>(clone_by);
}

}  // namespace rosetctl
