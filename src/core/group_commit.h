// Group commit for the state store: concurrent writers of one process share one SQLite
// transaction, so a burst of N writes costs one fsync instead of N, while each write stays
// atomic (a savepoint of its own) and durable when its call returns.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/sqlite.h"
#include "core/status.h"

namespace rosetctl {

class GroupCommit {
 public:
  using Body = std::function<Status(sqlite::Connection&)>;

  // `wal_autocheckpoint_pages`: SQLite's wal_autocheckpoint for the writing connection; 0
  // keeps SQLite's default (1,000 pages).
  explicit GroupCommit(std::string database_path, int wal_autocheckpoint_pages = 0)
      : path_(std::move(database_path)), wal_autocheckpoint_pages_(wal_autocheckpoint_pages) {}

  // Runs `body` inside a transaction, possibly together with other threads' bodies. Returns
  // `body`'s own status once the transaction committed (or the commit's error). A body that
  // fails is rolled back alone; the others still commit.
  Status run(const Body& body);

 private:
  struct Pending {
    const Body* body;
    Status result;
    bool done = false;
    // Each writer sleeps on its own: a finished batch wakes its writers and the next batch's
    // leader, not every writer in the queue.
    std::condition_variable wakeup;
  };

  // Executed by the thread that leads a batch, outside mutex_.
  void run_batch(const std::vector<Pending*>& batch);
  Expected<sqlite::Connection*> writer_connection();

  const std::string path_;
  const int wal_autocheckpoint_pages_;

  std::mutex mutex_;
  std::vector<Pending*> queue_;  // guarded by mutex_: waiting for the next batch
  bool leading_ = false;         // guarded by mutex_: a batch is being written

  // Used only by the current leader (leading_ serialises access).
  std::optional<sqlite::Connection> connection_;
};

}  // namespace rosetctl
