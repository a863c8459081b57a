// The state database's migrations, and applying them (schema.h).
#include "core/state_store/schema.h"

#include <fmt/format.h>

#include <iterator>

#include "core/state_store.h"

namespace rosetctl::state_sql {
namespace {

struct Migration {
  int version;
  const char* sql;
};

// Append-only: a released binary's databases carry these versions. Never edit a shipped step.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE volumes (
  id TEXT NOT NULL PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  provider TEXT NOT NULL,
  capacity_bytes INTEGER NOT NULL,
  parameters TEXT NOT NULL,
  context TEXT NOT NULL,
  access_type TEXT NOT NULL,
  content_source TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
CREATE TABLE controller_publications (
  volume_id TEXT NOT NULL REFERENCES volumes(id) ON DELETE RESTRICT,
  node_id TEXT NOT NULL,
  readonly INTEGER NOT NULL,
  capability TEXT NOT NULL,
  publish_context TEXT NOT NULL,
  PRIMARY KEY (volume_id, node_id)
) STRICT;
CREATE INDEX controller_publications_by_node ON controller_publications(node_id);
-- No foreign keys to volumes below: on a node host the volume row lives on the controller host.
CREATE TABLE stagings (
  volume_id TEXT NOT NULL,
  staging_path TEXT NOT NULL,
  capability TEXT NOT NULL,
  created_dir INTEGER NOT NULL,
  PRIMARY KEY (volume_id, staging_path)
) STRICT;
CREATE TABLE node_publications (
  target_path TEXT NOT NULL PRIMARY KEY,
  volume_id TEXT NOT NULL,
  staging_path TEXT NOT NULL,
  readonly INTEGER NOT NULL,
  capability TEXT NOT NULL,
  created_target INTEGER NOT NULL
) STRICT;
CREATE INDEX node_publications_by_staging ON node_publications(volume_id, staging_path);
)sql"},
    // Snapshots outlive their source volume, so no foreign key to volumes.
    {2, R"sql(
CREATE TABLE snapshots (
  id TEXT NOT NULL PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  provider TEXT NOT NULL,
  source_volume_id TEXT NOT NULL,
  source_volume_name TEXT NOT NULL,
  parent_id TEXT NOT NULL,
  message TEXT NOT NULL,
  parameters TEXT NOT NULL,
  size_bytes INTEGER NOT NULL,
  file_count INTEGER NOT NULL,
  new_bytes INTEGER NOT NULL,
  created_at_ns INTEGER NOT NULL
) STRICT;
CREATE INDEX snapshots_by_source ON snapshots(source_volume_id, created_at_ns);
)sql"},
    // Snapshot ids become ours, handed out before the provider finishes (CreateSnapshot may
    // answer ready_to_use=false); the provider's id moves to commit_id. Existing rows are ready
    // and keep their ids.
    {3, R"sql(
ALTER TABLE snapshots ADD COLUMN commit_id TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN ready INTEGER NOT NULL DEFAULT 1;
ALTER TABLE snapshots ADD COLUMN failure_code INTEGER NOT NULL DEFAULT 0;
ALTER TABLE snapshots ADD COLUMN failure TEXT NOT NULL DEFAULT '';
UPDATE snapshots SET commit_id = id;
CREATE INDEX snapshots_by_commit ON snapshots(commit_id);
)sql"},
    // What a snapshot holds (a directory, or an image volume of some kind), so that a restore
    // can ask for the right kind of volume. Rows from before hold directory commits or roset's.
    {4, R"sql(
ALTER TABLE snapshots ADD COLUMN context TEXT NOT NULL DEFAULT '{}';
)sql"},
    // The size a snapshot's volume had, which a restore must at least get. Snapshots taken
    // before get 0 (unknown): their volume may have grown since, and its size now would make a
    // restore at the size it had then OUT_OF_RANGE.
    {5, R"sql(
ALTER TABLE snapshots ADD COLUMN source_capacity_bytes INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Mutable parameters (ControllerModifyVolume), apart from the parameters a volume was
    // created with.
    {6, R"sql(
ALTER TABLE volumes ADD COLUMN mutable_parameters TEXT NOT NULL DEFAULT '{}';
)sql"},
    // The unique id of the mount each staging and publication made, so that an unmount takes
    // away only that mount (core/mount_ownership.h). 0: made before ids were recorded.
    {7, R"sql(
ALTER TABLE stagings ADD COLUMN mount_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE node_publications ADD COLUMN mount_id INTEGER NOT NULL DEFAULT 0;
)sql"},
    // The nodes registered with this controller (rosetctl.v1.Registry). No foreign key from
    // controller_publications: the controller's own node is never registered, and a forced
    // removal leaves a node's publications for ControllerUnpublishVolume.
    {8, R"sql(
CREATE TABLE nodes (
  node_id TEXT NOT NULL PRIMARY KEY,
  address TEXT NOT NULL,
  iscsi_initiator TEXT NOT NULL,
  topology TEXT NOT NULL,
  version TEXT NOT NULL,
  registered_at_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL
) STRICT;
)sql"},
    // The node a snapshot was pulled from ("" when taken here), so that a record is taken for
    // that node's snapshot only when it came from that node (daemon/content_source.cc,
    // held_here). Rows from before cannot say where they came from: a row whose source volume
    // names another node (a pulled one, snapshot_pull.cc names it so) gets "?", which is no
    // node, so it is trusted again only once its node confirms it (daemon/snapshot_pull.cc).
    {9, R"sql(
ALTER TABLE snapshots ADD COLUMN pulled_from TEXT NOT NULL DEFAULT '';
UPDATE snapshots SET pulled_from = '?' WHERE source_volume_id GLOB 'n[0-9]*.*';
)sql"},
    // The mount namespace each staging and publication mount was made in and its fingerprint
    // (core/recorded_mount.h), so that a node plugin restarted in a new namespace knows its
    // mounts again. Rows from before have neither and are judged by their id alone.
    {10, R"sql(
ALTER TABLE stagings ADD COLUMN mount_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stagings ADD COLUMN mount_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE node_publications ADD COLUMN mount_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE node_publications ADD COLUMN mount_fingerprint TEXT NOT NULL DEFAULT '';
)sql"},
    // The volume_context of each publication, so that a node plugin whose state is its own (the
    // volume records are the controller's) can bind a dead target again. Rows from before have
    // none; they are repaired from the volume record where there is one.
    {11, R"sql(
ALTER TABLE node_publications ADD COLUMN volume_context TEXT NOT NULL DEFAULT '{}';
)sql"},
    // Revoked node certificates (`node remove --revoke`): no foreign key to nodes, since a
    // revocation outlives the node's record (that is its point). IF NOT EXISTS: a database
    // whose user_version was set back (an old binary's restore of a newer copy) may hold it.
    {12, R"sql(
CREATE TABLE IF NOT EXISTS revoked_nodes (
  node_id TEXT NOT NULL PRIMARY KEY,
  revoked_at INTEGER NOT NULL
) STRICT;
)sql"},
    // A volume being moved to another node (`volume move`, daemon/volume_moves.h): `paused` while
    // its last delta is taken (no new publication), `moved` once the copy on `to_node` is the
    // volume (`new_volume_id`). A row of its own, not a column of volumes: most volumes never
    // move, and the row goes with the volume (DeleteVolume) or the move's undo.
    {13, R"sql(
CREATE TABLE volume_moves (
  volume_id TEXT NOT NULL PRIMARY KEY REFERENCES volumes(id) ON DELETE CASCADE,
  to_node TEXT NOT NULL,
  state TEXT NOT NULL,
  new_volume_id TEXT NOT NULL
) STRICT;
)sql"},
    // A volume's replica on another node (`volume replicate`, cluster/replica_loop.h), in the
    // controller's store: the volume lives in its node's store, so no foreign key; the row goes
    // with `--off`, and the loop drops it once the volume is gone.
    {14, R"sql(
CREATE TABLE IF NOT EXISTS volume_replicas (
  volume_id TEXT NOT NULL PRIMARY KEY,
  to_node TEXT NOT NULL,
  every_seconds INTEGER NOT NULL,
  next_due_unix INTEGER NOT NULL,
  snapshot_id TEXT NOT NULL DEFAULT '',
  source_snapshot_id TEXT NOT NULL DEFAULT '',
  last_success_unix INTEGER NOT NULL DEFAULT 0,
  last_bytes_sent INTEGER NOT NULL DEFAULT 0,
  rounds INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  last_error_unix INTEGER NOT NULL DEFAULT 0
) STRICT;
)sql"},
    // A node cordoned (`node cordon`, `node drain`): no new volume is placed on it until it is
    // uncordoned. A column of nodes: it is the node's state in the registry, and goes with the
    // node's record. Nodes from before are not cordoned (0).
    {15, R"sql(
ALTER TABLE nodes ADD COLUMN cordoned_at_ns INTEGER NOT NULL DEFAULT 0;
)sql"},
};
static_assert(std::size(kMigrations) == StateStore::kSchemaVersion,
              "kSchemaVersion must name the last migration");

Expected<int> user_version(sqlite::Connection& connection) {
  Expected<sqlite::Statement> statement = connection.prepare("PRAGMA user_version");
  if (!statement) return statement.status();
  Expected<bool> row = statement->step();
  if (!row) return row.status();
  return *row ? static_cast<int>(statement->column_int64(0)) : 0;
}

Status refuse_newer(int version, const std::string& path) {
  if (version <= StateStore::kSchemaVersion) return Status::ok();
  return error(Code::kFailedPrecondition,
               "state database {} has schema version {}, newer than this rosetctl understands "
               "({}); upgrade rosetctl",
               path, version, StateStore::kSchemaVersion);
}

// In WAL mode BEGIN IMMEDIATE excludes every other writer, so one process applies each step; the
// others wait on the lock, then see the new user_version and skip it.
Status apply_migration(sqlite::Connection& connection, const Migration& migration,
                       const std::string& path) {
  Expected<sqlite::Transaction> transaction = sqlite::Transaction::begin(connection);
  if (!transaction) return transaction.status();
  Expected<int> version = user_version(connection);
  if (!version) return version.status();
  ROSETCTL_RETURN_IF_ERROR(refuse_newer(*version, path));
  if (*version >= migration.version) return Status::ok();
  ROSETCTL_RETURN_IF_ERROR(connection.exec(migration.sql));
  ROSETCTL_RETURN_IF_ERROR(
      connection.exec(fmt::format("PRAGMA user_version = {}", migration.version)));
  return transaction->commit();
}

}  // namespace

Status migrate(sqlite::Connection& connection, const std::string& path) {
  Expected<int> version = user_version(connection);
  if (!version) return version.status();
  ROSETCTL_RETURN_IF_ERROR(refuse_newer(*version, path));
  for (const Migration& migration : kMigrations) {
    if (migration.version <= *version) continue;
    Status status = apply_migration(connection, migration, path);
    if (!status) {
      return status.with_context(
          fmt::format("migrating {} to schema version {}", path, migration.version));
    }
  }
  return Status::ok();
}

}  // namespace rosetctl::state_sql
