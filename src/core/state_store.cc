// The state database: opening it (creating and migrating it when needed) and the pool of
// connections reads borrow. The records' queries are in state_store/, one file per family.
#include "core/state_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "core/state_store/queries.h"
#include "core/state_store/schema.h"

namespace rosetctl {
namespace {

// Whoever else may write the state directory or the database can rewrite every record (which
// volume is where, who it is published to) and so steer this host's mounts: like sshd's
// StrictModes, the state must belong to the user running rosetctl and be writable by no one else.
Status check_owned_privately(const struct stat& st, std::string_view what,
                             const std::string& path) {
  if (st.st_uid != ::geteuid()) {
    return error(Code::kFailedPrecondition,
                 "{} {} belongs to uid {}, not to the user running rosetctl (uid {}): another "
                 "user could change its records; chown it, or pass a --state-dir of your own",
                 what, path, st.st_uid, ::geteuid());
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return error(Code::kFailedPrecondition,
                 "{} {} is writable by its group or by anyone (mode {:04o}): another user could "
                 "change its records; run `chmod go-w {}`",
                 what, path, st.st_mode & 07777, path);
  }
  return Status::ok();
}

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
  return check_owned_privately(st, "state directory", dir);
}

// Created here rather than by SQLite, which would use 0644; its -wal and -shm files copy our mode.
// A symbolic link in its place is refused (O_NOFOLLOW): the records are only where they seem.
Status create_private_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == ELOOP) {
    return error(Code::kFailedPrecondition,
                 "state database {} is a symbolic link; rosetctl opens only the file itself", path);
  }
  if (fd < 0) return errno_status(errno, fmt::format("creating state database {}", path));
  struct stat st {};
  const int stat_result = ::fstat(fd, &st);
  const int stat_errno = errno;
  ::close(fd);
  if (stat_result != 0) return errno_status(stat_errno, fmt::format("state database {}", path));
  return check_owned_privately(st, "state database", path);
}

}  // namespace

// --- Pool ------------------------------------------------------------------------------------

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
  ROSETCTL_RETURN_IF_ERROR(state_sql::migrate(*connection, path));
  constexpr int kOneCommandWalPages = 100;
  std::unique_ptr<StateStore> store(
      new StateStore(path, lifetime == Lifetime::kOneCommand ? kOneCommandWalPages : 0));
  store->give_back(std::move(*connection));
  return store;
}

Expected<std::vector<std::string>> StateStore::integrity_problems() {
  return read([&](sqlite::Connection& connection) -> Expected<std::vector<std::string>> {
    auto lines = select_all<std::string>(prepare(connection, "PRAGMA integrity_check"), read_text);
    if (!lines) return lines.status();
    if (lines->size() == 1 && lines->front() == "ok") lines->clear();
    return lines;
  });
}

}  // namespace rosetctl
