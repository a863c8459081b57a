// Receiving another store's objects (a snapshot streamed from another node): every object is
// checked against its name before it is stored, so a damaged one is refused (DATA_LOSS naming
// it) and never lands under a real name.
//
// The source is not trusted to send only what it was asked for, nor to stop: a receiver takes
// only the objects it was told to expect (expect_blob, expect_text), a blob never past the size
// the tree gives it, a tree or commit never past its bound (kMaxTreeBytes, kMaxCommitBytes) nor
// past the size its first chunk declared. Anything else is DATA_LOSS naming the source and the
// object, and what this receiver staged of that object is removed, so nothing is left that a
// later honest transfer would trip over.
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
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/commit_store/commit_store.h"
#include "core/commit_store/received_text.h"
#include "core/commit_store/sha256.h"
#include "core/unique_fd.h"

namespace rosetctl {

class ObjectReceiver {
 public:
  // A part file untouched this long belongs to a transfer nobody retried: a retry of an
  // interrupted one (a CO's, an operator's) comes within minutes.
  static constexpr std::chrono::hours kStalePartAge{24};

  // The most bytes a commit's text may have. A commit is a few short lines and its message
  // (commit_object.h); the message comes from CreateSnapshot's parameters, which a request may
  // fill with at most 64 KiB (daemon/request_limits.h), and escaping makes one byte at most
  // three (field_escape.h): 192 KiB, and the rest (ids, a volume's name and id) under 1 KiB.
  static constexpr int64_t kMaxCommitBytes = 256 << 10;
  // The most bytes a tree's text may have. A tree is one line per file, directory and link
  // (tree.cc): about 110 bytes plus the path, escaped, and the xattrs; our own commit of a
  // million files under 100-byte paths writes about 220 MB. The format has no limit of its own,
  // so this is one: 1 GiB is a million entries of 1 KiB each. A bigger tree is refused
  // (DATA_LOSS naming this limit); the source builds the whole text in memory to send it
  // (object_store_service.cc), so it is no tree a node could serve well anyway. It is received
  // on disk (received_text.h), so what a source sends before the bound costs no memory here.
  static constexpr int64_t kMaxTreeBytes = int64_t{1} << 30;

  enum class TextKind { kTree, kCommit };

  // `source` names where objects come from, for messages ("node \"a\"").
  static Expected<ObjectReceiver> open(const CommitStore& store, std::string source);

  // Asks for blob `id`, which holds `size` bytes (the tree says so): blob_chunk takes chunks of
  // the blobs asked for, and of each no more than its size, until it is complete.
  void expect_blob(std::string_view id, int64_t size);
  // Asks for the text of tree or commit `id`: text_chunk takes its chunks, tree() or commit()
  // the whole. INVALID_ARGUMENT when `id` is not an object id.
  Status expect_text(TextKind kind, std::string_view id);

  // Bytes of blob `id` kept from an interrupted transfer (0: none): fetch it from there.
  int64_t partial_size(std::string_view id) const;
  // Begins blob `id`'s part with stored blob `earlier` (a version of the same file that `id` may
  // have been appended to since), when no part of `id` is staged: its size, then fetch from
  // there naming `earlier` as the prefix's hash (the source starts over when it differs). 0 when
  // a part was staged already or another transfer is at it.
  Expected<int64_t> seed_part(std::string_view id, std::string_view earlier);

  // The next chunk of blob `id` (`size` bytes in all, as the source says): chunks of one blob
  // come in order, from the offset partial_size() gave or 0 (which starts it over), and one blob
  // is complete before the next begins. True when the blob is complete and verified: its
  // writeback starts, and it is stored (named) at the next flush(), which happens by itself
  // every kFlushBatch blobs. DATA_LOSS naming it and the source when it was not asked for (then
  // nothing is written), when `size` is not the size asked for, a chunk reaches past it, arrives
  // out of order, or its bytes do not hash to its name (the staged copy is then removed, so a
  // retry fetches it whole).
  Expected<bool> blob_chunk(std::string_view id, int64_t offset, std::string_view data,
                            int64_t size);
  // Stores every verified blob not stored yet, waiting for their content to be on disk (on a
  // few threads: one fsync after another would make a transfer of many files wait on the disk
  // once per file). Call it before relying on has_blob() for what arrived.
  Status flush();

  // The next chunk of the text of tree or commit `id`, asked for with expect_text (`size`: the
  // whole text's, as the source says). DATA_LOSS naming it and the source when it was not asked
  // for, or reaches past its size or bound; what arrived of it is then dropped.
  Status text_chunk(TextKind kind, std::string_view id, int64_t offset, std::string_view data,
                    int64_t size);
  // The tree and commit asked for, once their chunks have arrived: as the overloads below.
  // UNAVAILABLE when the transfer ended before the text was whole.
  Expected<Tree> tree(std::string_view id);
  Expected<CommitObject> commit(std::string_view id);

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
  // Refuses blob `id` (DATA_LOSS: `why`), removing what this receiver staged of it.
  Status refuse_blob(std::string_view id, std::string_view why);
  Expected<std::string> whole_text(TextKind kind, std::string_view id);
  // Parsed and stored; the text hashes to `id` already.
  Expected<Tree> store_tree(std::string_view id, std::string_view text) const;
  Expected<CommitObject> parse_commit_text(std::string_view id, std::string_view text) const;

  const CommitStore* store_;
  std::string source_;
  UniqueFd incoming_;               // the staging directory, its shared lock held
  std::optional<Partial> partial_;  // the blob being received
  struct Verified {
    std::string id;
    UniqueFd fd;  // its staged file, still under incoming/
  };
  std::vector<Verified> verified_;  // complete and verified, not stored yet
  // Blobs asked for and not complete yet, with their sizes.
  std::map<std::string, int64_t, std::less<>> wanted_blobs_;
  struct WantedText {
    TextKind kind;
    std::optional<ReceivedText> text;  // from its first chunk
  };
  std::map<std::string, WantedText, std::less<>> wanted_texts_;  // asked for, not taken yet
};

}  // namespace rosetctl
