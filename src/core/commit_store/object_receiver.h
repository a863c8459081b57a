// Receiving another store's objects (a snapshot streamed from another node): every object is
// checked against its name before it is stored, so a damaged one is refused (DATA_LOSS naming
// it) and never lands under a real name.
//
// Trees and blobs become objects of the store as each is verified. That makes nothing visible:
// only a commit names them, and the caller stores the commit (and records the snapshot) last,
// once everything it names is here; until then garbage collection is held off by the caller's
// shared store lock (an interrupted transfer's objects may be collected later, and fetched
// again). A blob is received into the staging area `incoming/<id>.part` under the store, kept
// when a transfer stops halfway, so a later one resumes it from its size; its hash is taken
// over the whole file when it completes (a resumed one rehashes the kept part first).
//
// Every receiver holds a shared lock on the staging area while it lives. One that finds no other
// receiver at work (it gets the lock exclusively for a moment) first removes the part files
// that no transfer has touched for kStalePartAge: those of transfers abandoned for good, which
// nothing else would ever collect. A part a live transfer writes or may still resume is never
// taken: that transfer holds the lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/commit_store/commit_store.h"
#include "core/commit_store/sha256.h"
#include "core/unique_fd.h"

namespace rosetctl {

class ObjectReceiver {
 public:
  // A part file untouched this long belongs to a transfer nobody retried: a retry of an
  // interrupted one (a CO's, an operator's) comes within minutes.
  static constexpr std::chrono::hours kStalePartAge{24};

  // `source` names where objects come from, for messages ("node \"a\"").
  static Expected<ObjectReceiver> open(const CommitStore& store, std::string source);

  // Bytes of blob `id` kept from an interrupted transfer (0: none): fetch it from there.
  int64_t partial_size(std::string_view id) const;

  // The next chunk of blob `id` (`size` bytes in all): chunks of one blob come in order, from
  // the offset partial_size() gave or 0 (which starts it over). True when the blob is complete
  // and verified: its writeback starts, and it is stored (named) at the next flush(), which
  // happens by itself every kFlushBatch blobs. DATA_LOSS naming it when its bytes do not hash
  // to its name (the staged copy is then removed, so a retry fetches it whole).
  Expected<bool> blob_chunk(std::string_view id, int64_t offset, std::string_view data,
                            int64_t size);
  // Stores every verified blob not stored yet, waiting for their content to be on disk (on a
  // few threads: one fsync after another would make a transfer of many files wait on the disk
  // once per file). Call it before relying on has_blob() for what arrived.
  Status flush();

  // A whole tree's text: verified, parsed and stored.
  Expected<Tree> tree(std::string_view id, std::string_view text) const;
  // A whole commit's text: verified and parsed, not stored (store_commit, once its objects are).
  Expected<CommitObject> commit(std::string_view id, std::string_view text) const;
  Status store_commit(std::string_view id, const CommitObject& commit) const;

 private:
  static constexpr std::size_t kFlushBatch = 64;

  struct Partial {
    std::string id;
    UniqueFd fd;
    Sha256 hash;
    int64_t received = 0;
  };
  ObjectReceiver(const CommitStore& store, std::string source, UniqueFd incoming)
      : store_(&store), source_(std::move(source)), incoming_(std::move(incoming)) {}
  Status start_blob(std::string_view id, int64_t offset);
  Expected<bool> finish_blob(int64_t size);

  const CommitStore* store_;
  std::string source_;
  UniqueFd incoming_;               // the staging directory, its shared lock held
  std::optional<Partial> partial_;  // the blob being received
  struct Verified {
    std::string id;
    UniqueFd fd;  // its staged file, still under incoming/
  };
  std::vector<Verified> verified_;  // complete and verified, not stored yet
};

}  // namespace rosetctl
