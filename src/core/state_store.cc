// The state database: opening and migrating it, the connection pool, and the record queries.
#include "core/state_store.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/validate.h"

namespace rosetctl {
namespace {

using StringMap = std::map<std::string, std::string>;

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
};
static_assert(std::size(kMigrations) == StateStore::kSchemaVersion,
              "kSchemaVersion must name the last migration");

constexpr const char* kVolumeColumns =
    "id, name, provider, capacity_bytes, parameters, context, access_type, content_source, "
    "created_at, mutable_parameters";
constexpr const char* kControllerPublicationColumns =
    "volume_id, node_id, readonly, capability, publish_context";
constexpr const char* kStagingColumns =
    "volume_id, staging_path, capability, created_dir, mount_id, mount_ns, mount_fingerprint";
constexpr const char* kNodePublicationColumns =
    "volume_id, target_path, staging_path, readonly, capability, created_target, mount_id, "
    "mount_ns, mount_fingerprint, volume_context";
constexpr const char* kSnapshotColumns =
    "id, name, provider, source_volume_id, source_volume_name, parent_id, message, parameters, "
    "size_bytes, file_count, new_bytes, created_at_ns, commit_id, ready, failure_code, failure, "
    "context, source_capacity_bytes, pulled_from";
constexpr const char* kNodeColumns =
    "node_id, address, iscsi_initiator, topology, version, registered_at_ns, last_seen_ns";

// --- Opening ---------------------------------------------------------------------------------

Status make_private_dirs(const std::string& dir) {
  std::filesystem::path prefix;
  for (const std::filesystem::path& part : std::filesystem::path(dir)) {
    prefix /= part;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return errno_status(errno, fmt::format("creating state directory {}", prefix.string()));
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return errno_status(errno, fmt::format("state directory {}", dir));
  if (!S_ISDIR(st.st_mode)) {
    return error(Code::kFailedPrecondition, "state directory {} is not a directory", dir);
  }
  return Status::ok();
}

// Created here rather than by SQLite, which would use 0644; its -wal and -shm files copy our mode.
Status create_private_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status(errno, fmt::format("creating state database {}", path));
  ::close(fd);
  return Status::ok();
}

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

// --- Statements and rows ---------------------------------------------------------------------

template <typename T>
void bind_arg(sqlite::Statement& statement, int index, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    statement.bind_bool(index, value);
  } else if constexpr (std::is_integral_v<T>) {
    statement.bind_int64(index, value);
  } else {
    statement.bind_text(index, std::string_view(value));
  }
}

// Prepares `sql` and binds `args` to ?1, ?2, ... by type.
template <typename... Args>
Expected<sqlite::Statement> prepare(sqlite::Connection& connection, const std::string& sql,
                                    const Args&... args) {
  Expected<sqlite::Statement> statement = connection.prepare(sql);
  if (!statement) return statement;
  int index = 0;
  (bind_arg(*statement, ++index, args), ...);
  return statement;
}

template <typename T>
using RowReader = Expected<T> (*)(const sqlite::Statement&);

template <typename T>
Expected<std::vector<T>> select_all(Expected<sqlite::Statement> statement, RowReader<T> read) {
  if (!statement) return statement.status();
  std::vector<T> rows;
  for (;;) {
    Expected<bool> has_row = statement->step();
    if (!has_row) return has_row.status();
    if (!*has_row) return rows;
    Expected<T> row = read(*statement);
    if (!row) return row.status();
    rows.push_back(std::move(*row));
  }
}

template <typename T>
Expected<std::optional<T>> select_one(Expected<sqlite::Statement> statement, RowReader<T> read) {
  if (!statement) return statement.status();
  Expected<bool> has_row = statement->step();
  if (!has_row) return has_row.status();
  if (!*has_row) return std::optional<T>();
  Expected<T> row = read(*statement);
  if (!row) return row.status();
  return std::optional<T>(std::move(*row));
}

Status run(Expected<sqlite::Statement> statement) {
  return statement ? statement->run() : statement.status();
}

// Invalid UTF-8 is replaced rather than thrown about: CSI strings arrive UTF-8 checked anyway.
std::string to_json(const StringMap& map) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [key, value] : map)
    object[key] = value;
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Expected<StringMap> from_json(const std::string& text, std::string_view column) {
  const nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  StringMap map;
  if (object.is_object()) {
    for (auto it = object.begin(); it != object.end(); ++it) {
      if (!it.value().is_string()) break;
      map.emplace(it.key(), it.value().get_ref<const std::string&>());
    }
    if (map.size() == object.size()) return map;
  }
  return error(Code::kDataLoss, "state database column {} is not a JSON object of strings: {}",
               column, text);
}

Expected<std::string> read_text(const sqlite::Statement& row) {
  return row.column_text(0);
}
Expected<int64_t> read_int64(const sqlite::Statement& row) {
  return row.column_int64(0);
}

Expected<VolumeRecord> read_volume(const sqlite::Statement& row) {
  VolumeRecord volume;
  volume.id = row.column_text(0);
  volume.name = row.column_text(1);
  volume.provider = row.column_text(2);
  volume.capacity_bytes = row.column_int64(3);
  Expected<StringMap> parameters = from_json(row.column_text(4), "volumes.parameters");
  if (!parameters) return parameters.status();
  volume.parameters = std::move(*parameters);
  Expected<StringMap> context = from_json(row.column_text(5), "volumes.context");
  if (!context) return context.status();
  volume.context = std::move(*context);
  volume.access_type = row.column_text(6);
  volume.content_source = row.column_text(7);
  volume.created_at = row.column_int64(8);
  Expected<StringMap> mutable_parameters =
      from_json(row.column_text(9), "volumes.mutable_parameters");
  if (!mutable_parameters) return mutable_parameters.status();
  volume.mutable_parameters = std::move(*mutable_parameters);
  return volume;
}

Expected<ControllerPublication> read_controller_publication(const sqlite::Statement& row) {
  ControllerPublication publication;
  publication.volume_id = row.column_text(0);
  publication.node_id = row.column_text(1);
  publication.readonly = row.column_bool(2);
  publication.capability = row.column_text(3);
  Expected<StringMap> context =
      from_json(row.column_text(4), "controller_publications.publish_context");
  if (!context) return context.status();
  publication.publish_context = std::move(*context);
  return publication;
}

// The three mount columns starting at `first`.
RecordedMount read_recorded_mount(const sqlite::Statement& row, int first) {
  return RecordedMount{static_cast<uint64_t>(row.column_int64(first)),
                       static_cast<uint64_t>(row.column_int64(first + 1)),
                       MountFingerprint::from_text(row.column_text(first + 2))};
}

Expected<Staging> read_staging(const sqlite::Statement& row) {
  return Staging{row.column_text(0), row.column_text(1), row.column_text(2), row.column_bool(3),
                 read_recorded_mount(row, 4)};
}

Expected<NodePublication> read_node_publication(const sqlite::Statement& row) {
  Expected<StringMap> context = from_json(row.column_text(9), "node_publications.volume_context");
  if (!context) return context.status();
  return NodePublication{row.column_text(0),          row.column_text(1), row.column_text(2),
                         row.column_bool(3),          row.column_text(4), row.column_bool(5),
                         read_recorded_mount(row, 6), std::move(*context)};
}

Expected<SnapshotRecord> read_snapshot(const sqlite::Statement& row) {
  SnapshotRecord snapshot;
  snapshot.id = row.column_text(0);
  snapshot.name = row.column_text(1);
  snapshot.provider = row.column_text(2);
  snapshot.source_volume_id = row.column_text(3);
  snapshot.source_volume_name = row.column_text(4);
  snapshot.parent_id = row.column_text(5);
  snapshot.message = row.column_text(6);
  Expected<StringMap> parameters = from_json(row.column_text(7), "snapshots.parameters");
  if (!parameters) return parameters.status();
  snapshot.parameters = std::move(*parameters);
  snapshot.size_bytes = row.column_int64(8);
  snapshot.file_count = row.column_int64(9);
  snapshot.new_bytes = row.column_int64(10);
  snapshot.created_at_ns = row.column_int64(11);
  snapshot.commit_id = row.column_text(12);
  snapshot.ready = row.column_bool(13);
  snapshot.failure_code = static_cast<int>(row.column_int64(14));
  snapshot.failure = row.column_text(15);
  Expected<StringMap> context = from_json(row.column_text(16), "snapshots.context");
  if (!context) return context.status();
  snapshot.context = std::move(*context);
  snapshot.source_capacity_bytes = row.column_int64(17);
  snapshot.pulled_from = row.column_text(18);
  return snapshot;
}

Expected<NodeRecord> read_node(const sqlite::Statement& row) {
  NodeRecord node;
  node.node_id = row.column_text(0);
  node.address = row.column_text(1);
  node.iscsi_initiator = row.column_text(2);
  Expected<StringMap> topology = from_json(row.column_text(3), "nodes.topology");
  if (!topology) return topology.status();
  node.topology = std::move(*topology);
  node.version = row.column_text(4);
  node.registered_at_ns = row.column_int64(5);
  node.last_seen_ns = row.column_int64(6);
  return node;
}

// What still holds a volume, as phrases: `published to node "n1"`, `staged at "/p"`, ...
Expected<std::vector<std::string>> volume_users(sqlite::Connection& connection,
                                                std::string_view id) {
  return select_all<std::string>(
      prepare(connection,
              "SELECT 'published to node \"' || node_id || '\"' FROM controller_publications "
              "WHERE volume_id = ?1 "
              "UNION ALL SELECT 'staged at \"' || staging_path || '\"' FROM stagings "
              "WHERE volume_id = ?1 "
              "UNION ALL SELECT 'published at \"' || target_path || '\"' FROM node_publications "
              "WHERE volume_id = ?1",
              id),
      read_text);
}

}  // namespace

// --- Pool ------------------------------------------------------------------------------------

// A borrowed connection; goes back to the pool when the lease ends.
class StateStore::Lease {
 public:
  Lease(StateStore* store, sqlite::Connection connection)
      : store_(store), connection_(std::move(connection)) {}
  Lease(Lease&& other) noexcept
      : store_(std::exchange(other.store_, nullptr)), connection_(std::move(other.connection_)) {}
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (store_ != nullptr) store_->give_back(std::move(connection_));
  }

  sqlite::Connection& connection() { return connection_; }

 private:
  StateStore* store_;  // null once moved from
  sqlite::Connection connection_;
};

Expected<StateStore::Lease> StateStore::borrow() {
  {
    std::lock_guard lock(pool_mutex_);
    if (!idle_connections_.empty()) {
      // The most recently used: the ones left at the front are those a burst no longer needs.
      sqlite::Connection connection = std::move(idle_connections_.back().connection);
      idle_connections_.pop_back();
      return Lease(this, std::move(connection));
    }
  }
  // Opened outside the lock: opening touches the disk and may wait on the busy timeout.
  Expected<sqlite::Connection> connection = sqlite::Connection::open(path_);
  if (!connection) return connection.status();
  return Lease(this, std::move(*connection));
}

void StateStore::give_back(sqlite::Connection connection) {
  // A connection stuck in a transaction (a failed ROLLBACK) would hold the write lock: drop it.
  if (connection.in_transaction()) return;
  std::lock_guard lock(pool_mutex_);
  if (idle_connections_.size() < kMaxPooledConnections) {
    idle_connections_.push_back({std::move(connection), std::chrono::steady_clock::now()});
  }
}

std::size_t StateStore::pooled_connections() {
  std::lock_guard lock(pool_mutex_);
  return idle_connections_.size();
}

void StateStore::close_idle_connections(std::chrono::steady_clock::duration idle_for) {
  std::vector<sqlite::Connection> closing;  // closed after the lock is released
  std::lock_guard lock(pool_mutex_);
  auto now = std::chrono::steady_clock::now();
  while (idle_connections_.size() > kKeptConnections &&
         now - idle_connections_.front().since >= idle_for) {
    closing.push_back(std::move(idle_connections_.front().connection));
    idle_connections_.erase(idle_connections_.begin());
  }
}

template <typename Body>
auto StateStore::read(Body&& body) -> decltype(body(std::declval<sqlite::Connection&>())) {
  Expected<Lease> lease = borrow();
  if (!lease) return lease.status();
  return body(lease->connection());
}

template <typename Body>
Status StateStore::write(Body&& body, Durability durability) {
  return group_commit_.run(GroupCommit::Body(std::forward<Body>(body)), durability);
}

Expected<std::unique_ptr<StateStore>> StateStore::open(const std::string& state_dir,
                                                       Lifetime lifetime) {
  if (state_dir.empty()) {
    return error(Code::kInvalidArgument, "state directory is empty; pass --state-dir");
  }
  ROSETCTL_RETURN_IF_ERROR(make_private_dirs(state_dir));
  std::string path = (std::filesystem::path(state_dir) / "state.db").string();
  ROSETCTL_RETURN_IF_ERROR(create_private_file(path));
  Expected<sqlite::Connection> connection = sqlite::Connection::open(path);
  if (!connection) return connection.status();
  // Checked once per process, before anything reads or writes a record: damage in a page no
  // call of this process reads would otherwise go unseen, and a write into a damaged b-tree
  // can spread it. It costs a read of the whole file, which is small.
  ROSETCTL_RETURN_IF_ERROR(connection->check_integrity());
  ROSETCTL_RETURN_IF_ERROR(migrate(*connection, path));
  constexpr int kOneCommandWalPages = 100;
  std::unique_ptr<StateStore> store(
      new StateStore(path, lifetime == Lifetime::kOneCommand ? kOneCommandWalPages : 0));
  store->give_back(std::move(*connection));
  return store;
}

// --- Volumes ---------------------------------------------------------------------------------

Status StateStore::insert_volume(const VolumeRecord& volume) {
  return write([&](sqlite::Connection& connection) -> Status {
    // Checked first so the message can say which key clashed, and with whom.
    Expected<std::optional<std::string>> holder = select_one<std::string>(
        prepare(connection, "SELECT name FROM volumes WHERE id = ?1", volume.id), read_text);
    if (!holder) return holder.status();
    if (*holder) {
      return error(Code::kAlreadyExists, "volume id \"{}\" is already taken by volume named \"{}\"",
                   volume.id, **holder);
    }
    holder = select_one<std::string>(
        prepare(connection, "SELECT id FROM volumes WHERE name = ?1", volume.name), read_text);
    if (!holder) return holder.status();
    if (*holder) {
      return error(Code::kAlreadyExists, "volume name \"{}\" is already taken by volume \"{}\"",
                   volume.name, **holder);
    }
    return run(prepare(connection,
                       fmt::format("INSERT INTO volumes ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                                   "?8, ?9, ?10)",
                                   kVolumeColumns),
                       volume.id, volume.name, volume.provider, volume.capacity_bytes,
                       to_json(volume.parameters), to_json(volume.context), volume.access_type,
                       volume.content_source, volume.created_at,
                       to_json(volume.mutable_parameters)));
  });
}

Expected<std::optional<VolumeRecord>> StateStore::find_volume(std::string_view id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection, fmt::format("SELECT {} FROM volumes WHERE id = ?1", kVolumeColumns),
                id),
        read_volume);
  });
}

Expected<std::optional<VolumeRecord>> StateStore::find_volume_by_name(std::string_view name) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection, fmt::format("SELECT {} FROM volumes WHERE name = ?1", kVolumeColumns),
                name),
        read_volume);
  });
}

Expected<std::vector<VolumeRecord>> StateStore::list_volumes(std::string_view after_id, int limit) {
  return read([&](sqlite::Connection& connection) {
    // SQLite reads a negative LIMIT as "no limit".
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM volumes WHERE id > ?1 ORDER BY id "
                                          "LIMIT ?2",
                                          kVolumeColumns),
                              after_id, limit > 0 ? limit : -1),
                      read_volume);
  });
}

Expected<int64_t> StateStore::count_volumes() {
  return read([&](sqlite::Connection& connection) -> Expected<int64_t> {
    Expected<std::optional<int64_t>> count =
        select_one(prepare(connection, "SELECT COUNT(*) FROM volumes"), read_int64);
    if (!count) return count.status();
    return count->value_or(0);
  });
}

Expected<bool> StateStore::has_volumes_of(std::string_view provider) {
  return read([&](sqlite::Connection& connection) -> Expected<bool> {
    Expected<std::optional<int64_t>> found = select_one(
        prepare(connection, "SELECT 1 FROM volumes WHERE provider = ?1 LIMIT 1", provider),
        read_int64);
    if (!found) return found.status();
    return found->has_value();
  });
}

Status StateStore::check_readable() {
  return read([&](sqlite::Connection& connection) -> Status {
    return select_one(prepare(connection, "SELECT 1 FROM volumes LIMIT 1"), read_int64).status();
  });
}

namespace {

Expected<std::map<std::string, int64_t>> count_by_provider(sqlite::Connection& connection,
                                                           const char* sql) {
  using Row = std::pair<std::string, int64_t>;
  auto rows = select_all<Row>(prepare(connection, sql), [](const sqlite::Statement& row) {
    return Expected<Row>(Row{row.column_text(0), row.column_int64(1)});
  });
  if (!rows) return rows.status();
  return std::map<std::string, int64_t>(rows->begin(), rows->end());
}

}  // namespace

Expected<std::map<std::string, int64_t>> StateStore::count_volumes_by_provider() {
  return read([&](sqlite::Connection& connection) {
    return count_by_provider(connection,
                             "SELECT provider, COUNT(*) FROM volumes GROUP BY provider");
  });
}

Expected<std::map<std::string, int64_t>> StateStore::count_snapshots_by_provider() {
  return read([&](sqlite::Connection& connection) {
    return count_by_provider(connection,
                             "SELECT provider, COUNT(*) FROM snapshots GROUP BY provider");
  });
}

Expected<std::vector<std::string>> StateStore::integrity_problems() {
  return read([&](sqlite::Connection& connection) -> Expected<std::vector<std::string>> {
    auto lines = select_all<std::string>(prepare(connection, "PRAGMA integrity_check"), read_text);
    if (!lines) return lines.status();
    if (lines->size() == 1 && lines->front() == "ok") lines->clear();
    return lines;
  });
}

Status StateStore::update_volume_capacity(std::string_view id, int64_t capacity_bytes) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(run(prepare(
        connection, "UPDATE volumes SET capacity_bytes = ?2 WHERE id = ?1", id, capacity_bytes)));
    if (connection.changes() == 0) return error(Code::kNotFound, "volume \"{}\" not found", id);
    return Status::ok();
  });
}

Status StateStore::update_volume_mutable_parameters(std::string_view id,
                                                    const StringMap& mutable_parameters) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection, "UPDATE volumes SET mutable_parameters = ?2 WHERE id = ?1", id,
                    to_json(mutable_parameters))));
    if (connection.changes() == 0) return error(Code::kNotFound, "volume \"{}\" not found", id);
    return Status::ok();
  });
}

Status StateStore::delete_volume(std::string_view id) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::vector<std::string>> users = volume_users(connection, id);
    if (!users) return users.status();
    if (!users->empty()) {
      return error(Code::kFailedPrecondition,
                   "volume \"{}\" is still {}; unpublish and unstage it before deleting", id,
                   fmt::join(*users, ", "));
    }
    return run(prepare(connection, "DELETE FROM volumes WHERE id = ?1", id));
  });
}

// --- Controller publications -----------------------------------------------------------------

Status StateStore::upsert_controller_publication(const ControllerPublication& publication) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::optional<std::string>> volume = select_one<std::string>(
        prepare(connection, "SELECT id FROM volumes WHERE id = ?1", publication.volume_id),
        read_text);
    if (!volume) return volume.status();
    if (!*volume) return error(Code::kNotFound, "volume \"{}\" not found", publication.volume_id);
    return run(prepare(connection,
                       fmt::format("INSERT INTO controller_publications ({}) VALUES (?1, ?2, ?3, "
                                   "?4, ?5) ON CONFLICT (volume_id, node_id) DO UPDATE SET "
                                   "readonly = ?3, capability = ?4, publish_context = ?5",
                                   kControllerPublicationColumns),
                       publication.volume_id, publication.node_id, publication.readonly,
                       publication.capability, to_json(publication.publish_context)));
  });
}

Expected<std::optional<ControllerPublication>> StateStore::find_controller_publication(
    std::string_view volume_id, std::string_view node_id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(prepare(connection,
                              fmt::format("SELECT {} FROM controller_publications WHERE "
                                          "volume_id = ?1 AND node_id = ?2",
                                          kControllerPublicationColumns),
                              volume_id, node_id),
                      read_controller_publication);
  });
}

Expected<std::vector<ControllerPublication>> StateStore::controller_publications(
    std::string_view volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM controller_publications WHERE "
                                          "volume_id = ?1 ORDER BY node_id",
                                          kControllerPublicationColumns),
                              volume_id),
                      read_controller_publication);
  });
}

Status StateStore::delete_controller_publication(std::string_view volume_id,
                                                 std::string_view node_id) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       "DELETE FROM controller_publications WHERE volume_id = ?1 AND node_id = ?2",
                       volume_id, node_id));
  });
}

Expected<std::vector<ControllerPublication>> StateStore::controller_publications_on_node(
    std::string_view node_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM controller_publications WHERE "
                                          "node_id = ?1 ORDER BY volume_id",
                                          kControllerPublicationColumns),
                              node_id),
                      read_controller_publication);
  });
}

Expected<int64_t> StateStore::count_controller_publications_on_node(std::string_view node_id) {
  return read([&](sqlite::Connection& connection) -> Expected<int64_t> {
    Expected<std::optional<int64_t>> count = select_one(
        prepare(connection, "SELECT COUNT(*) FROM controller_publications WHERE node_id = ?1",
                node_id),
        read_int64);
    if (!count) return count.status();
    return count->value_or(0);
  });
}

// --- Stagings --------------------------------------------------------------------------------

Status StateStore::upsert_staging(const Staging& staging) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       fmt::format("INSERT INTO stagings ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                                   "ON CONFLICT (volume_id, staging_path) DO UPDATE SET "
                                   "capability = ?3, created_dir = ?4, mount_id = ?5, mount_ns = "
                                   "?6, mount_fingerprint = ?7",
                                   kStagingColumns),
                       staging.volume_id, staging.staging_path, staging.capability,
                       staging.created_dir, static_cast<int64_t>(staging.mount.id),
                       static_cast<int64_t>(staging.mount.mount_ns),
                       staging.mount.fingerprint.to_text()));
  });
}

Status StateStore::set_staging_mount(std::string_view volume_id, std::string_view staging_path,
                                     const RecordedMount& mount) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       "UPDATE stagings SET mount_id = ?3, mount_ns = ?4, mount_fingerprint = ?5 "
                       "WHERE volume_id = ?1 AND staging_path = ?2",
                       volume_id, staging_path, static_cast<int64_t>(mount.id),
                       static_cast<int64_t>(mount.mount_ns), mount.fingerprint.to_text()));
  });
}

Expected<std::optional<Staging>> StateStore::find_staging(std::string_view volume_id,
                                                          std::string_view staging_path) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection,
                fmt::format("SELECT {} FROM stagings WHERE volume_id = ?1 AND staging_path = ?2",
                            kStagingColumns),
                volume_id, staging_path),
        read_staging);
  });
}

Expected<std::vector<Staging>> StateStore::stagings(std::string_view volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM stagings WHERE volume_id = ?1 ORDER BY "
                                          "staging_path",
                                          kStagingColumns),
                              volume_id),
                      read_staging);
  });
}

Expected<std::vector<Staging>> StateStore::all_stagings() {
  return read([&](sqlite::Connection& connection) {
    return select_all(
        prepare(connection, fmt::format("SELECT {} FROM stagings ORDER BY volume_id, staging_path",
                                        kStagingColumns)),
        read_staging);
  });
}

Status StateStore::delete_staging(std::string_view volume_id, std::string_view staging_path) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection,
                       "DELETE FROM stagings WHERE volume_id = ?1 AND staging_path = ?2", volume_id,
                       staging_path));
  });
}

// --- Node publications -----------------------------------------------------------------------
// A node publication records a bind mount, which does not outlive the machine: its record need
// not either. Written without waiting for the disk (Durability::kUntilReboot), it survives a
// crash of the process; after a machine crash the startup reconcile drops records whose mounts
// are gone, and a record the crash took with it had no mount left to describe.

Status StateStore::upsert_node_publication(const NodePublication& publication) {
  return write(
      [&](sqlite::Connection& connection) {
        return run(
            prepare(connection,
                    fmt::format("INSERT INTO node_publications ({}) VALUES (?1, ?2, ?3, ?4, "
                                "?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (target_path) DO UPDATE SET "
                                "volume_id = ?1, staging_path = ?3, readonly = ?4, capability = "
                                "?5, created_target = ?6, mount_id = ?7, mount_ns = ?8, "
                                "mount_fingerprint = ?9, volume_context = ?10",
                                kNodePublicationColumns),
                    publication.volume_id, publication.target_path, publication.staging_path,
                    publication.readonly, publication.capability, publication.created_target,
                    static_cast<int64_t>(publication.mount.id),
                    static_cast<int64_t>(publication.mount.mount_ns),
                    publication.mount.fingerprint.to_text(), to_json(publication.volume_context)));
      },
      Durability::kUntilReboot);
}

Status StateStore::set_node_publication_mount(std::string_view target_path,
                                              const RecordedMount& mount) {
  return write(
      [&](sqlite::Connection& connection) {
        return run(prepare(connection,
                           "UPDATE node_publications SET mount_id = ?2, mount_ns = ?3, "
                           "mount_fingerprint = ?4 WHERE target_path = ?1",
                           target_path, static_cast<int64_t>(mount.id),
                           static_cast<int64_t>(mount.mount_ns), mount.fingerprint.to_text()));
      },
      Durability::kUntilReboot);
}

Expected<std::optional<NodePublication>> StateStore::find_node_publication(
    std::string_view target_path) {
  return read([&](sqlite::Connection& connection) {
    return select_one(prepare(connection,
                              fmt::format("SELECT {} FROM node_publications WHERE target_path = ?1",
                                          kNodePublicationColumns),
                              target_path),
                      read_node_publication);
  });
}

Expected<std::vector<NodePublication>> StateStore::node_publications(std::string_view volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM node_publications WHERE volume_id = ?1 "
                                          "ORDER BY target_path",
                                          kNodePublicationColumns),
                              volume_id),
                      read_node_publication);
  });
}

Expected<std::vector<NodePublication>> StateStore::node_publications_of_staging(
    std::string_view volume_id, std::string_view staging_path) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM node_publications WHERE volume_id = ?1 "
                                          "AND staging_path = ?2 ORDER BY target_path",
                                          kNodePublicationColumns),
                              volume_id, staging_path),
                      read_node_publication);
  });
}

Status StateStore::delete_node_publication(std::string_view target_path) {
  return write(
      [&](sqlite::Connection& connection) {
        return run(prepare(connection, "DELETE FROM node_publications WHERE target_path = ?1",
                           target_path));
      },
      Durability::kUntilReboot);
}

// --- Snapshots -------------------------------------------------------------------------------

Status StateStore::insert_snapshot(const SnapshotRecord& snapshot) {
  return write([&](sqlite::Connection& connection) -> Status {
    Expected<std::optional<std::string>> holder = select_one<std::string>(
        prepare(connection, "SELECT name FROM snapshots WHERE id = ?1", snapshot.id), read_text);
    if (!holder) return holder.status();
    if (*holder) {
      return error(Code::kAlreadyExists, "snapshot {} is already recorded, named \"{}\"",
                   snapshot.id, **holder);
    }
    holder = select_one<std::string>(
        prepare(connection, "SELECT id FROM snapshots WHERE name = ?1", snapshot.name), read_text);
    if (!holder) return holder.status();
    if (*holder) {
      return error(Code::kAlreadyExists, "snapshot name \"{}\" is already taken by snapshot {}",
                   snapshot.name, **holder);
    }
    return run(prepare(connection,
                       fmt::format("INSERT INTO snapshots ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                                   "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
                                   kSnapshotColumns),
                       snapshot.id, snapshot.name, snapshot.provider, snapshot.source_volume_id,
                       snapshot.source_volume_name, snapshot.parent_id, snapshot.message,
                       to_json(snapshot.parameters), snapshot.size_bytes, snapshot.file_count,
                       snapshot.new_bytes, snapshot.created_at_ns, snapshot.commit_id,
                       snapshot.ready, snapshot.failure_code, snapshot.failure,
                       to_json(snapshot.context), snapshot.source_capacity_bytes,
                       snapshot.pulled_from));
  });
}

Status StateStore::set_snapshot_pulled_from(std::string_view id, std::string_view node) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection, "UPDATE snapshots SET pulled_from = ?2 WHERE id = ?1", id, node)));
    if (connection.changes() == 0) {
      return error(Code::kNotFound, "snapshot {} is no longer recorded", id);
    }
    return Status::ok();
  });
}

Status StateStore::update_snapshot(const SnapshotRecord& snapshot) {
  return write([&](sqlite::Connection& connection) -> Status {
    ROSETCTL_RETURN_IF_ERROR(run(prepare(
        connection,
        "UPDATE snapshots SET commit_id = ?2, parent_id = ?3, size_bytes = ?4, "
        "file_count = ?5, new_bytes = ?6, created_at_ns = ?7, ready = ?8, failure_code = ?9, "
        "failure = ?10, context = ?11 WHERE id = ?1",
        snapshot.id, snapshot.commit_id, snapshot.parent_id, snapshot.size_bytes,
        snapshot.file_count, snapshot.new_bytes, snapshot.created_at_ns, snapshot.ready,
        snapshot.failure_code, snapshot.failure, to_json(snapshot.context))));
    if (connection.changes() == 0) {
      return error(Code::kNotFound, "snapshot {} is no longer recorded", snapshot.id);
    }
    return Status::ok();
  });
}

Expected<std::optional<SnapshotRecord>> StateStore::find_snapshot(std::string_view id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection, fmt::format("SELECT {} FROM snapshots WHERE id = ?1", kSnapshotColumns),
                id),
        read_snapshot);
  });
}

Expected<std::optional<SnapshotRecord>> StateStore::find_snapshot_by_name(std::string_view name) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection,
                fmt::format("SELECT {} FROM snapshots WHERE name = ?1", kSnapshotColumns), name),
        read_snapshot);
  });
}

Expected<std::optional<SnapshotRecord>> StateStore::find_snapshot_by_commit(
    std::string_view commit_id) {
  if (commit_id.empty()) return std::optional<SnapshotRecord>();
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection,
                fmt::format("SELECT {} FROM snapshots WHERE commit_id = ?1", kSnapshotColumns),
                commit_id),
        read_snapshot);
  });
}

Expected<std::vector<SnapshotRecord>> StateStore::list_snapshots(
    std::string_view after_id, int limit, std::string_view source_volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_all(prepare(connection,
                              fmt::format("SELECT {} FROM snapshots WHERE id > ?1 AND (?2 = '' OR "
                                          "source_volume_id = ?2) ORDER BY id LIMIT ?3",
                                          kSnapshotColumns),
                              after_id, source_volume_id, limit > 0 ? limit : -1),
                      read_snapshot);
  });
}

Expected<std::optional<SnapshotRecord>> StateStore::latest_snapshot_of(
    std::string_view source_volume_id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(prepare(connection,
                              fmt::format("SELECT {} FROM snapshots WHERE source_volume_id = ?1 "
                                          "AND ready ORDER BY created_at_ns DESC, id DESC LIMIT 1",
                                          kSnapshotColumns),
                              source_volume_id),
                      read_snapshot);
  });
}

Status StateStore::delete_snapshot(std::string_view id) {
  return write([&](sqlite::Connection& connection) {
    return run(prepare(connection, "DELETE FROM snapshots WHERE id = ?1", id));
  });
}

// --- Registered nodes ------------------------------------------------------------------------

namespace {

// Another node holding `initiator`, compared without case: iSCSI names are case-insensitive
// and rows written before names were normalised at registration may hold capitals.
Expected<std::optional<std::string>> other_node_with_initiator(sqlite::Connection& connection,
                                                               std::string_view initiator,
                                                               std::string_view node_id) {
  return select_one<std::string>(
      prepare(connection,
              "SELECT node_id FROM nodes WHERE iscsi_initiator != '' AND "
              "lower(iscsi_initiator) = lower(?1) AND node_id != ?2 ORDER BY node_id LIMIT 1",
              initiator, node_id),
      read_text);
}

}  // namespace

Expected<NodeRecord> StateStore::upsert_node(const NodeRecord& node) {
  NodeRecord stored = node;
  Status status = write([&](sqlite::Connection& connection) -> Status {
    if (!node.iscsi_initiator.empty()) {
      // In the transaction that writes, so two nodes never come to share one name.
      auto holder = other_node_with_initiator(connection, node.iscsi_initiator, node.node_id);
      if (!holder) return holder.status();
      if (holder->has_value()) {
        return error(Code::kAlreadyExists, "iscsi_initiator {} is node \"{}\"'s",
                     display_quoted(node.iscsi_initiator, 223), **holder);
      }
    }
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection,
                    fmt::format("INSERT INTO nodes ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON "
                                "CONFLICT (node_id) DO UPDATE SET address = ?2, iscsi_initiator = "
                                "?3, topology = ?4, version = ?5, last_seen_ns = ?7",
                                kNodeColumns),
                    node.node_id, node.address, node.iscsi_initiator, to_json(node.topology),
                    node.version, node.registered_at_ns, node.last_seen_ns)));
    Expected<std::optional<int64_t>> first = select_one(
        prepare(connection, "SELECT registered_at_ns FROM nodes WHERE node_id = ?1", node.node_id),
        read_int64);
    if (!first) return first.status();
    stored.registered_at_ns = first->value_or(node.registered_at_ns);
    return Status::ok();
  });
  if (!status) return status;
  return stored;
}

Expected<std::optional<std::string>> StateStore::node_with_initiator(std::string_view initiator,
                                                                     std::string_view except) {
  return read([&](sqlite::Connection& connection) {
    return other_node_with_initiator(connection, initiator, except);
  });
}

Expected<std::optional<NodeRecord>> StateStore::find_node(std::string_view node_id) {
  return read([&](sqlite::Connection& connection) {
    return select_one(
        prepare(connection, fmt::format("SELECT {} FROM nodes WHERE node_id = ?1", kNodeColumns),
                node_id),
        read_node);
  });
}

Expected<std::vector<NodeRecord>> StateStore::list_nodes() {
  return read([&](sqlite::Connection& connection) {
    return select_all(
        prepare(connection, fmt::format("SELECT {} FROM nodes ORDER BY node_id", kNodeColumns)),
        read_node);
  });
}

Expected<NodeRemoval> StateStore::delete_node(std::string_view node_id, bool force) {
  NodeRemoval removal;
  Status status = write([&](sqlite::Connection& connection) -> Status {
    // Checked in the transaction that deletes, so no publication slips in between.
    Expected<std::vector<std::string>> published = select_all<std::string>(
        prepare(connection,
                "SELECT volume_id FROM controller_publications WHERE node_id = ?1 ORDER BY "
                "volume_id",
                node_id),
        read_text);
    if (!published) return published.status();
    Expected<std::optional<std::string>> registered = select_one<std::string>(
        prepare(connection, "SELECT node_id FROM nodes WHERE node_id = ?1", node_id), read_text);
    if (!registered) return registered.status();
    // Removing what is not there is done already, whatever is still published to it.
    if (registered->has_value() && !published->empty() && !force) {
      Expected<std::vector<std::string>> names = select_all<std::string>(
          prepare(connection,
                  "SELECT '\"' || v.name || '\"' FROM controller_publications p JOIN volumes v "
                  "ON v.id = p.volume_id WHERE p.node_id = ?1 ORDER BY v.name",
                  node_id),
          read_text);
      if (!names) return names.status();
      constexpr std::size_t kNamed = 10;
      std::string more = names->size() > kNamed
                             ? fmt::format(" and {} more", names->size() - kNamed)
                             : std::string();
      names->resize(std::min(names->size(), kNamed));
      return error(Code::kFailedPrecondition, "node \"{}\" still has volumes published to it: {}{}",
                   node_id, fmt::join(*names, ", "), more);
    }
    ROSETCTL_RETURN_IF_ERROR(
        run(prepare(connection, "DELETE FROM nodes WHERE node_id = ?1", node_id)));
    removal.removed = connection.changes() > 0;
    removal.published_volume_ids = std::move(*published);
    return Status::ok();
  });
  if (!status) return status;
  return removal;
}

}  // namespace rosetctl
