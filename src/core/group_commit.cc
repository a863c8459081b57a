// Leader/follower batching: the first writer to find no batch in progress writes everything
// queued so far; writers arriving meanwhile queue up for the next batch.
#include "core/group_commit.h"

#include <algorithm>

namespace rosetctl {
namespace {

Status rollback_savepoint(sqlite::Connection& connection) {
  ROSETCTL_RETURN_IF_ERROR(connection.run("ROLLBACK TO one_write"));
  return connection.run("RELEASE one_write");
}

}  // namespace

Status GroupCommit::run(const Body& body, Durability durability) {
  Pending me{&body, durability, Status::ok()};
  std::unique_lock lock(mutex_);
  queue_.push_back(&me);
  int woken = 0;  // posts waited for
  while (leading_) {
    lock.unlock();
    me.wakeup.wait();  // this write's batch is done, or this writer is first in the queue
    lock.lock();
    ++woken;
    if (me.done) {                // a batch led by another writer took it
      while (woken < me.posts) {  // its leader's post is still to come
        lock.unlock();
        me.wakeup.wait();
        lock.lock();
        ++woken;
      }
      return me.result;
    }
  }

  // No batch in progress: lead one with everything queued so far, this write included.
  leading_ = true;
  std::vector<Pending*> batch;
  batch.swap(queue_);
  lock.unlock();
  run_batch(batch);
  lock.lock();
  leading_ = false;
  for (Pending* pending : batch) {
    pending->done = true;
    if (pending != &me) ++pending->posts;  // posted below, after the unlock
  }
  // The first writer queued meanwhile leads the next batch, unless a writer arriving before it
  // wakes does (no batch waits for one thread to be scheduled). Posted under mutex_: while it is
  // queued and not done it cannot return, so its Pending is alive.
  if (!queue_.empty()) {
    ++queue_.front()->posts;
    queue_.front()->wakeup.post();
  }
  lock.unlock();
  // This batch's writers after the unlock, so that none wakes only to block on mutex_. Each is
  // posted once, for being done, and returns only after this post's wait (Pending::posts): it
  // may then end its Pending, which nothing here touches afterwards (sem_post itself may, as
  // POSIX allows).
  for (Pending* pending : batch) {
    if (pending != &me) pending->wakeup.post();
  }
  return me.result;
}

std::size_t GroupCommit::queued_writes() {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

Expected<sqlite::Connection*> GroupCommit::writer_connection() {
  // A connection left inside a transaction (a failed ROLLBACK) would hold the write lock.
  if (connection_ && connection_->in_transaction()) connection_.reset();
  if (!connection_) {
    auto opened = sqlite::Connection::open(path_);
    if (!opened) return opened.status();
    if (wal_autocheckpoint_pages_ > 0) {
      ROSETCTL_RETURN_IF_ERROR(
          opened->exec(fmt::format("PRAGMA wal_autocheckpoint={}", wal_autocheckpoint_pages_)));
    }
    connection_.emplace(std::move(*opened));
    syncing_commits_ = true;  // sqlite::Connection::open sets synchronous=FULL
  }
  return &*connection_;
}

Status GroupCommit::sync_commits(sqlite::Connection& connection, bool sync) {
  if (sync == syncing_commits_) return Status::ok();
  ROSETCTL_RETURN_IF_ERROR(
      connection.exec(sync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  syncing_commits_ = sync;
  return Status::ok();
}

void GroupCommit::run_batch(const std::vector<Pending*>& batch) {
  auto fail_all = [&](const Status& status) {
    for (Pending* pending : batch)
      pending->result = status;
  };
  auto connection = writer_connection();
  if (!connection) return fail_all(connection.status());
  bool sync = std::any_of(batch.begin(), batch.end(), [](const Pending* pending) {
    return pending->durability == Durability::kDisk;
  });
  if (Status set = sync_commits(**connection, sync); !set) return fail_all(set);
  auto transaction = sqlite::Transaction::begin(**connection);
  if (!transaction) return fail_all(transaction.status());

  for (Pending* pending : batch) {
    if (Status saved = (*connection)->run("SAVEPOINT one_write"); !saved) return fail_all(saved);
    pending->result = (*pending->body)(**connection);
    if (!(*connection)->in_transaction()) {
      // SQLite rolled the whole transaction back (disk full, I/O error): nothing committed.
      return fail_all(pending->result.is_ok()
                          ? error(Code::kInternal, "state store transaction was rolled back")
                          : pending->result);
    }
    Status closed = pending->result.is_ok() ? (*connection)->run("RELEASE one_write")
                                            : rollback_savepoint(**connection);
    if (!closed) return fail_all(closed);
  }
  if (Status committed = transaction->commit(); !committed) fail_all(committed);
}

}  // namespace rosetctl
