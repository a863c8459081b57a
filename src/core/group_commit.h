// Group commit for the state store: concurrent writers of one process share one SQLite
// transaction, so a burst of N writes costs one fsync instead of N, while each write stays
// atomic (a savepoint of its own) and as durable as its writer asked when its call returns.
#pragma once

#include <semaphore.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/sqlite.h"
#include "core/status.h"

namespace rosetctl {

// What a write's caller waits for.
enum class Durability {
  // Synced to disk (fsync): the write survives a power loss.
  kDisk,
  // Written to the WAL in the kernel's page cache, synced with the next kDisk write or
  // checkpoint: survives a crash of this process, not of the machine. The WAL is replayed in
  // order, so a machine crash loses only the newest such writes, never one that a surviving
  // write came after. For records of kernel state, such as mounts, which a machine crash ends
  // as well.
  kUntilReboot,
};

class GroupCommit {
 public:
  using Body = std::function<Status(sqlite::Connection&)>;

  // `wal_autocheckpoint_pages`: SQLite's wal_autocheckpoint for the writing connection; 0
  // keeps SQLite's default (1,000 pages).
  explicit GroupCommit(std::string database_path, int wal_autocheckpoint_pages = 0)
      : path_(std::move(database_path)), wal_autocheckpoint_pages_(wal_autocheckpoint_pages) {}

  // Runs `body` inside a transaction, possibly together with other threads' bodies. Returns
  // `body`'s own status once the transaction committed (or the commit's error). A body that
  // fails is rolled back alone; the others still commit. A batch is synced to disk when any of
  // its writes asks for kDisk.
  Status run(const Body& body, Durability durability = Durability::kDisk);

  // Writes waiting for the next batch (a test uses it to make two writes share one).
  std::size_t queued_writes();

 private:
  // A POSIX semaphore: it may be destroyed as soon as its wait returned, even while the post
  // that woke it is still returning. Not std::binary_semaphore, whose wait (libstdc++ 12) spins
  // on sched_yield first: a context switch each, more than the lock contention it replaced.
  class Wakeup {
   public:
    Wakeup() { ::sem_init(&semaphore_, 0, 0); }
    ~Wakeup() { ::sem_destroy(&semaphore_); }
    Wakeup(const Wakeup&) = delete;
    Wakeup& operator=(const Wakeup&) = delete;
    void post() { ::sem_post(&semaphore_); }
    void wait() {
      while (::sem_wait(&semaphore_) != 0) {  // EINTR only
      }
    }

   private:
    sem_t semaphore_;
  };

  struct Pending {
    const Body* body;
    Durability durability;
    Status result;
    bool done = false;  // guarded by mutex_: the write committed (or failed)
    // Guarded by mutex_: wakeups posted to this writer, or promised (counted before a leader
    // posts them after unlocking). The writer returns only once it has waited for each: a writer
    // woken to lead, then taken into a batch another arrival led, would otherwise return while
    // that leader's post is still to come, and the post would land on its ended Pending.
    int posts = 0;
    // Each writer sleeps on its own: woken when its batch is done, or when it is first in the
    // queue as a batch ends. A semaphore, not a condition variable under mutex_: the leader wakes
    // writers after releasing mutex_, so a woken writer does not at once block on the lock its
    // waker still holds (bench/README.md: a third of the group commit's context switches were
    // that).
    Wakeup wakeup;
  };

  // Executed by the thread that leads a batch, outside mutex_.
  void run_batch(const std::vector<Pending*>& batch);
  Expected<sqlite::Connection*> writer_connection();
  // Sets SQLite's `synchronous` for the next transaction: FULL syncs the WAL at commit, NORMAL
  // leaves that to a later FULL commit or checkpoint.
  Status sync_commits(sqlite::Connection& connection, bool sync);

  const std::string path_;
  const int wal_autocheckpoint_pages_;

  std::mutex mutex_;
  std::vector<Pending*> queue_;  // guarded by mutex_: waiting for the next batch
  // Guarded by mutex_: a batch is being written.
  bool leading_ = false;

  // Used only by the current leader (leading_ serialises access).
  std::optional<sqlite::Connection> connection_;
  bool syncing_commits_ = true;  // connection_'s `synchronous` is FULL (as opened)
};

}  // namespace rosetctl
