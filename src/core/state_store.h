// The host's state database (<state_dir>/state.db): volumes, controller publications, stagings,
// node publications, snapshots and registered nodes as typed records, with versioned schema
// migrations.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/group_commit.h"
#include "core/recorded_mount.h"
#include "core/sqlite.h"
#include "core/status.h"

namespace rosetctl {

// A volume on its way to another node (`volume move`): paused (no new publication while its last
// delta is taken), then moved (the copy on `to_node`, `new_volume_id`, is the volume now).
struct VolumeMove {
  std::string volume_id;
  std::string to_node;
  bool moved = false;         // false: paused
  std::string new_volume_id;  // once moved

  bool operator==(const VolumeMove&) const = default;
};

// A volume's replica (`volume replicate`): the controller keeps its latest snapshot on another
// node, taken and pulled every `every_seconds` (cluster/replica_loop.h). Kept in the
// controller's store, keyed by the volume's placed id: the volume itself lives in its node's.
struct VolumeReplicaRecord {
  std::string volume_id;  // placed id
  std::string to_node;
  int64_t every_seconds = 0;
  int64_t next_due_unix = 0;       // when the loop takes it up next
  std::string snapshot_id;         // the last replicated snapshot's placed id on to_node
  std::string source_snapshot_id;  // the same snapshot's placed id on the volume's node
  int64_t last_success_unix = 0;   // 0: none yet
  int64_t last_bytes_sent = 0;     // what the last successful round sent to to_node
  int64_t rounds = 0;              // successful rounds
  std::string last_error;          // "" after a success
  int64_t last_error_unix = 0;

  bool operator==(const VolumeReplicaRecord&) const = default;
};

struct VolumeRecord {
  std::string id;        // primary key
  std::string name;      // CSI name: unique
  std::string provider;  // "local", "roset", "iscsi"
  int64_t capacity_bytes = 0;
  std::map<std::string, std::string> parameters;  // CreateVolume parameters as given
  std::map<std::string, std::string> context;     // volume_context returned to the CO
  std::string access_type;                        // "mount" or "block"
  std::string content_source;                     // "" or "snapshot:<id>" / "volume:<id>"
  int64_t created_at = 0;                         // unix seconds
  // The mutable parameters in effect (set at creation, changed by ControllerModifyVolume);
  // unlike `parameters`, not what CreateVolume was given.
  std::map<std::string, std::string> mutable_parameters;

  bool operator==(const VolumeRecord&) const = default;
};

// A volume made available to a node by ControllerPublishVolume.
struct ControllerPublication {
  std::string volume_id;
  std::string node_id;
  bool readonly = false;
  std::string capability;  // opaque serialized capability, compared on re-publish
  std::map<std::string, std::string> publish_context;

  bool operator==(const ControllerPublication&) const = default;
};

// A volume staged on this node (NodeStageVolume). The volume row may live on another host.
struct Staging {
  std::string volume_id;
  std::string staging_path;
  std::string capability;
  bool created_dir = false;  // we made staging_path, so unstage removes it
  RecordedMount mount;       // the mount staging made; id 0: not known

  bool operator==(const Staging&) const = default;
};

// A volume published on this node (NodePublishVolume); target_path identifies it.
struct NodePublication {
  std::string volume_id;
  std::string target_path;
  std::string staging_path;
  bool readonly = false;
  std::string capability;
  bool created_target = false;  // we made target_path, so unpublish removes it
  RecordedMount mount;          // the mount publishing made; id 0: not known
  // The volume_context NodePublish was given: binding the target again after a restart needs
  // it (roset's subPath, readOnly), and a node plugin with a state of its own (Kubernetes) has
  // no volume record to take it from.
  std::map<std::string, std::string> volume_context;

  bool operator==(const NodePublication&) const = default;
};

// A snapshot of a volume. The id is ours (the CSI snapshot_id, handed out before the provider
// has finished); commit_id is the provider's name for what it stored (for `local`, the commit's
// content hash), "" until the snapshot is ready. Snapshots outlive the volume they were taken of.
struct SnapshotRecord {
  std::string id;    // primary key
  std::string name;  // CSI name: unique
  std::string commit_id;
  std::string provider;
  std::string source_volume_id;
  std::string source_volume_name;  // kept for display after the volume is deleted
  std::string parent_id;           // commit id of the volume's previous snapshot, or ""
  std::string message;
  std::map<std::string, std::string> parameters;  // CreateSnapshot parameters as given
  int64_t size_bytes = 0;                         // bytes of the files it holds
  int64_t source_capacity_bytes = 0;              // the volume's size when taken (0: unknown)
  int64_t file_count = 0;
  int64_t new_bytes = 0;      // bytes it added to the provider's storage when taken
  int64_t created_at_ns = 0;  // unix nanoseconds
  bool ready = false;         // the provider finished: commit_id and the sizes are set
  int failure_code = 0;       // a Code when the provider failed; 0 while pending and once ready
  std::string failure;        // what the provider said when it failed
  // What the snapshot holds, as the provider describes it once ready, with the keys of a volume
  // context: local directory commits {type: dir}; local image commits {type: image, access:
  // mount|block, fs: ext4|xfs}. Empty for snapshots recorded before schema 4, and for roset.
  std::map<std::string, std::string> context;
  // The node it was pulled from (daemon/snapshot_pull.h); "" when it was taken here, "?" when
  // it was pulled before the node was recorded (schema 9).
  std::string pulled_from;

  bool operator==(const SnapshotRecord&) const = default;
};

// A node registered with this controller (rosetctl.v1.Registry). The controller's own node
// needs no record to be published to.
struct NodeRecord {
  std::string node_id;                          // primary key: the CSI node id
  std::string address;                          // host:port of its `serve --role node`, or ""
  std::string iscsi_initiator;                  // its initiator name (IQN), or ""
  std::map<std::string, std::string> topology;  // its accessible topology
  std::string version;                          // the rosetctl version it runs
  int64_t registered_at_ns = 0;                 // unix nanoseconds: first registration
  int64_t last_seen_ns = 0;                     // unix nanoseconds: latest registration
  int64_t cordoned_at_ns = 0;  // unix nanoseconds it was cordoned at; 0: not cordoned

  bool operator==(const NodeRecord&) const = default;
};

// What removing a node did: whether it was registered, and the volumes still published to it
// (a forced removal leaves their publications in place).
struct NodeRemoval {
  bool removed = false;
  std::vector<std::string> published_volume_ids;
};

// Safe to share between threads; several processes (CLI invocations beside `serve`) may open the
// same directory at once: every mutating method is exactly one SQLite transaction. Not to be
// used across fork(): open a new store in the child.
class StateStore {
 public:
  // The schema version this binary creates and understands (the last migration's number).
  static constexpr int kSchemaVersion = 15;

  // Who opens the store. The first connection of a process reads SQLite's whole WAL to
  // rebuild its index (2.3 ms of CPU at 2.9 MB here). `serve` pays that once and keeps
  // SQLite's checkpoint every 1,000 pages (4 MiB); a process that runs one command pays it at
  // every start, so its writes checkpoint as soon as the WAL passes 100 pages (400 KiB).
  enum class Lifetime { kLongRunning, kOneCommand };

  // Creates state_dir (0700, parents too) and state.db (0600) when missing, then migrates the
  // schema up to kSchemaVersion. A database from a newer rosetctl is FAILED_PRECONDITION.
  static Expected<std::unique_ptr<StateStore>> open(const std::string& state_dir,
                                                    Lifetime lifetime = Lifetime::kLongRunning);

  const std::string& path() const { return path_; }

  // Closes pooled read connections beyond the few always kept that have been idle for
  // `idle_for`: `serve` calls it between bursts of calls.
  void close_idle_connections(std::chrono::steady_clock::duration idle_for);
  // Read connections in the pool now (open, not lent out).
  std::size_t pooled_connections();
  // A burst keeps up to kMaxPooledConnections for reuse (opening one and compiling its
  // statements costs more than a read); close_idle_connections closes all but kKeptConnections
  // once the burst is over, as each holds its page cache and compiled statements.
  static constexpr std::size_t kKeptConnections = 2;
  static constexpr std::size_t kMaxPooledConnections = 16;

  // Volumes. insert_volume is ALREADY_EXISTS when the id or the name is taken.
  Status insert_volume(const VolumeRecord& volume);
  Expected<std::optional<VolumeRecord>> find_volume(std::string_view id);
  Expected<std::optional<VolumeRecord>> find_volume_by_name(std::string_view name);
  // Keyset paging: ids strictly greater than after_id, ordered by id; limit <= 0 means all.
  Expected<std::vector<VolumeRecord>> list_volumes(std::string_view after_id, int limit);
  Expected<int64_t> count_volumes();
  // Whether any volume of `provider` is recorded: one row read, not a count or a list.
  Expected<bool> has_volumes_of(std::string_view provider);
  // The volumes table can be read (Probe): one row at most, whatever the number of volumes.
  Status check_readable();
  // Volumes and snapshots per provider name (the metrics endpoint): one indexed scan each.
  Expected<std::map<std::string, int64_t>> count_volumes_by_provider();
  Expected<std::map<std::string, int64_t>> count_snapshots_by_provider();
  // SQLite's integrity check of the database file (`doctor`): the problems it lists, none when
  // the file is sound.
  Expected<std::vector<std::string>> integrity_problems();
  Status update_volume_capacity(std::string_view id, int64_t capacity_bytes);  // NOT_FOUND
  // NOT_FOUND for an unknown id.
  Status update_volume_mutable_parameters(
      std::string_view id, const std::map<std::string, std::string>& mutable_parameters);
  // FAILED_PRECONDITION while the volume is published or staged; a missing id is OK.
  Status delete_volume(std::string_view id);

  // Moves (volume_moves.cc). pause_volume_move: NOT_FOUND for an unknown volume,
  // FAILED_PRECONDITION naming what holds it while it is published or staged, or when it is
  // moved already or paused for another node; pausing again for the same node is OK.
  Status pause_volume_move(std::string_view volume_id, std::string_view to_node);
  // FAILED_PRECONDITION unless paused for `to_node` (or moved there as `new_volume_id` already).
  Status finish_volume_move(std::string_view volume_id, std::string_view to_node,
                            std::string_view new_volume_id);
  // Ends a pause (a move given up); FAILED_PRECONDITION once moved; no pause is OK.
  Status cancel_volume_move(std::string_view volume_id);
  Expected<std::optional<VolumeMove>> find_volume_move(std::string_view volume_id);

  // Replicas (volume_replicas.cc), in the controller's store. put_volume_replica sets the target
  // and interval (a new target forgets the last round's snapshots: they stay on the old one).
  Status put_volume_replica(std::string_view volume_id, std::string_view to_node,
                            int64_t every_seconds, int64_t next_due_unix);
  Status remove_volume_replica(std::string_view volume_id);  // a missing one is OK
  Expected<std::optional<VolumeReplicaRecord>> find_volume_replica(std::string_view volume_id);
  Expected<std::vector<VolumeReplicaRecord>> list_volume_replicas();
  // NOT_FOUND when the volume has no replica.
  Status set_volume_replica_due(std::string_view volume_id, int64_t next_due_unix);
  // A round's outcome (every field but the setting and next_due_unix), kept only while the
  // setting still names round.to_node: NOT_FOUND otherwise (it changed during the round).
  Status record_volume_replica_round(const VolumeReplicaRecord& round);

  // Controller publications: the volume must exist (NOT_FOUND otherwise).
  Status upsert_controller_publication(const ControllerPublication& publication);
  Expected<std::optional<ControllerPublication>> find_controller_publication(
      std::string_view volume_id, std::string_view node_id);
  Expected<std::vector<ControllerPublication>> controller_publications(std::string_view volume_id);
  Status delete_controller_publication(std::string_view volume_id, std::string_view node_id);
  // Every controller publication to one node, by volume id.
  Expected<std::vector<ControllerPublication>> controller_publications_on_node(
      std::string_view node_id);
  Expected<int64_t> count_controller_publications_on_node(std::string_view node_id);

  // Stagings on this node.
  Status upsert_staging(const Staging& staging);
  // Records the mount a staging made (or made again); nothing happens without the record.
  Status set_staging_mount(std::string_view volume_id, std::string_view staging_path,
                           const RecordedMount& mount);
  Expected<std::optional<Staging>> find_staging(std::string_view volume_id,
                                                std::string_view staging_path);
  Expected<std::vector<Staging>> stagings(std::string_view volume_id);
  // Every staging on this node, whatever volume (a consumer holds no volume records).
  Expected<std::vector<Staging>> all_stagings();
  Status delete_staging(std::string_view volume_id, std::string_view staging_path);

  // Node publications on this node. Their writes survive a crash of the process but may be
  // lost with the machine, as the bind mounts they describe are (Durability::kUntilReboot).
  Status upsert_node_publication(const NodePublication& publication);
  Status set_node_publication_mount(std::string_view target_path, const RecordedMount& mount);
  Expected<std::optional<NodePublication>> find_node_publication(std::string_view target_path);
  Expected<std::vector<NodePublication>> node_publications(std::string_view volume_id);
  Expected<std::vector<NodePublication>> node_publications_of_staging(
      std::string_view volume_id, std::string_view staging_path);
  Status delete_node_publication(std::string_view target_path);

  // What NodePublishVolume reads before it binds, from one snapshot of the database (one read
  // transaction: one WAL read lock and one look at what changed, instead of one per record).
  struct NodePublishState {
    std::optional<VolumeRecord> volume;  // none where the volume lives on another host
    std::optional<VolumeMove> move;
    std::optional<Staging> staging;              // of (volume_id, staging_path)
    std::optional<NodePublication> publication;  // at target_path, of whatever volume
  };
  Expected<NodePublishState> node_publish_state(std::string_view volume_id,
                                                std::string_view staging_path,
                                                std::string_view target_path);

  // Snapshots. insert_snapshot is ALREADY_EXISTS when the id or the name is taken.
  Status insert_snapshot(const SnapshotRecord& snapshot);
  Expected<std::optional<SnapshotRecord>> find_snapshot(std::string_view id);
  Expected<std::optional<SnapshotRecord>> find_snapshot_by_name(std::string_view name);
  Expected<std::optional<SnapshotRecord>> find_snapshot_by_commit(std::string_view commit_id);
  // Records the outcome of a pending snapshot (ready, commit id and sizes, or failure);
  // NOT_FOUND when the record is gone.
  Status update_snapshot(const SnapshotRecord& snapshot);
  // Records that snapshot `id` is node `node`'s (it confirmed it); NOT_FOUND when gone.
  Status set_snapshot_pulled_from(std::string_view id, std::string_view node);
  // Keyset paging by id like list_volumes; `source_volume_id` "" means every volume.
  Expected<std::vector<SnapshotRecord>> list_snapshots(std::string_view after_id, int limit,
                                                       std::string_view source_volume_id = "");
  // The most recent ready snapshot of a volume (the parent of its next one).
  Expected<std::optional<SnapshotRecord>> latest_snapshot_of(std::string_view source_volume_id);
  // A missing id is OK.
  Status delete_snapshot(std::string_view id);

  // Registered nodes. upsert_node inserts or replaces every field but registered_at_ns, which
  // the first registration set; returns the record as stored. ALREADY_EXISTS when another node
  // holds the same iSCSI initiator name (compared without case): two nodes never share one.
  Expected<NodeRecord> upsert_node(const NodeRecord& node);
  // The node other than `except` that holds `initiator` (compared without case), if any.
  Expected<std::optional<std::string>> node_with_initiator(std::string_view initiator,
                                                           std::string_view except);
  Expected<std::optional<NodeRecord>> find_node(std::string_view node_id);
  Expected<std::vector<NodeRecord>> list_nodes();  // ordered by node id
  // A missing node is OK (removed: false). While volumes are published to a registered node
  // it is FAILED_PRECONDITION naming them, unless `force`: then the node goes and its
  // publications stay. The result lists the publications left either way.
  Expected<NodeRemoval> delete_node(std::string_view node_id, bool force);
  // Cordons a registered node (no new volume is placed on it) at `now_ns`, or uncordons it
  // (`now_ns` 0). Cordoning a cordoned node keeps the time it was first cordoned. nullopt: the
  // node is not registered. A registration never changes it.
  Expected<std::optional<NodeRecord>> set_node_cordoned(std::string_view node_id, int64_t now_ns);

  // Revoked node certificates: every certificate of `node_id` issued at or before `revoked_at`
  // (unix seconds) is refused from then on (cluster/node_revocations.h). Revoking again moves the
  // time forward, never back.
  Status revoke_node_certificates(std::string_view node_id, int64_t revoked_at);
  // When `node_id`'s certificates were last revoked, if ever.
  Expected<std::optional<int64_t>> node_certificates_revoked_at(std::string_view node_id);

 private:
  class Lease;

  StateStore(const std::string& path, int wal_autocheckpoint_pages)
      : path_(path), group_commit_(path, wal_autocheckpoint_pages) {}

  // Lends out an idle connection, opening a new one when none is free.
  Expected<Lease> borrow();
  void give_back(sqlite::Connection connection);
  // Runs `body(connection)` on a borrowed connection; for single-statement reads, which SQLite
  // already runs against one consistent snapshot.
  template <typename Body>
  auto read(Body&& body) -> decltype(body(std::declval<sqlite::Connection&>()));
  // Runs `body(connection)` atomically and durably: in a transaction it may share with other
  // threads' writes (group commit), rolled back alone if it does not return OK.
  template <typename Body>
  Status write(Body&& body, Durability durability = Durability::kDisk);

  const std::string path_;

  std::mutex pool_mutex_;
  struct IdleConnection {
    sqlite::Connection connection;
    std::chrono::steady_clock::time_point since;
  };
  std::vector<IdleConnection> idle_connections_;  // guarded by pool_mutex_; oldest first

  // Every write of this process goes through here: one fsync per burst of writes. Other
  // processes meet us at SQLite's write lock.
  GroupCommit group_commit_;
};

}  // namespace rosetctl
