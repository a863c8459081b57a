// core/commit_store: commit objects, trees and blobs as read back from disk. Each input is one
// scratch store holding what the input says, then read through every path that reads a store:
// read_commit/read_tree, verification, image lookup and restore, restore of a directory commit,
// garbage collection, and the receiving side of a snapshot pulled from another node
// (ObjectReceiver). A damaged or hostile object must end in a Status, never a crash, a sanitizer
// report, or a file created outside the restore's destination.
//
// The input, in three parts separated by NUL bytes:
//
//   <flags byte><commit text> \0 <tree text> \0 <blob bytes>
//
// Objects are named by their hash, so a fuzzer could never guess a name a commit can point to:
// "@tree" in the commit text is replaced by the tree's id, "@blob" in the tree text by the
// blob's. Each object is then written under its id (as the store would have), and the flags
// damage them on disk afterwards the way a disk or a person might: bit 0 flips the last byte of
// the tree, bit 1 of the commit, bit 2 of the blob, bit 3 cuts the blob in half.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/commit_store/commit_image.h"
#include "core/commit_store/commit_object.h"
#include "core/commit_store/commit_store.h"
#include "core/commit_store/object_receiver.h"
#include "core/commit_store/restore.h"
#include "core/commit_store/sha256.h"
#include "core/commit_store/store_gc.h"
#include "core/commit_store/store_verify.h"
#include "core/commit_store/tree.h"
#include "core/commit_store/tree_diff.h"
#include "fuzz_check.h"

namespace {

using namespace rosetctl;
namespace fs = std::filesystem;

const std::string& scratch() {
  return fuzz::scratch_directory("commit-store");
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// Writes `bytes` at `path` (making its fan-out directory), as the store would have stored them.
void write_object(const std::string& path, std::string_view bytes) {
  fs::create_directories(fs::path(path).parent_path());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  FUZZ_CHECK(fd >= 0, "the scratch store takes a file");
  FUZZ_CHECK(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()),
             "the scratch store takes the bytes");
  ::close(fd);
}

void flip_last_byte(std::string& bytes) {
  if (!bytes.empty()) bytes.back() = static_cast<char>(bytes.back() ^ 0x01);
}

// The properties of what parsed: it serializes back to the same objects.
void check_round_trips(const Tree& tree, const CommitObject& commit) {
  auto tree_again = parse_tree(serialize_tree(tree));
  FUZZ_CHECK(tree_again && tree_again->entries == tree.entries, "a parsed tree round-trips");
  auto commit_again = parse_commit(serialize_commit(commit));
  FUZZ_CHECK(commit_again && *commit_again == commit, "a parsed commit round-trips");
  // Totals and diffs of any tree the store accepts are computable (no overflow, no crash).
  (void)tree_totals(tree);
  (void)diff_trees(Tree{}, tree);
  (void)diff_trees(tree, tree);
}

// Only "store" and "restore" may be in the scratch directory after a restore: nothing the tree
// names may land beside them (a path with "..", a symlink followed, an absolute hard link).
void check_nothing_escaped() {
  for (const auto& entry : fs::directory_iterator(scratch())) {
    std::string name = entry.path().filename();
    FUZZ_CHECK(name == "store" || name == "restore", "a restore writes only beneath its target");
  }
}

void read_everything(const CommitStore& store, const std::string& commit_id,
                     const std::string& tree_id, const std::string& blob_id,
                     std::string_view tree_text, std::string_view commit_text,
                     std::string_view blob) {
  auto commit = store.read_commit(commit_id);
  auto tree = store.read_tree(tree_id);
  if (commit && tree) check_round_trips(*tree, *commit);

  {
    auto lock = store.lock_shared(std::chrono::milliseconds(0));
    FUZZ_CHECK(lock.has_value(), "nobody else holds the scratch store's lock");
    auto ids = store.commit_ids();
    FUZZ_CHECK(ids.has_value(), "the scratch store lists its commits");
    auto report = verify_commits(store, *ids, 1, nullptr, *lock);
    FUZZ_CHECK(report.has_value(), "verification runs on any store");
    FUZZ_CHECK(report->problems.empty() == report->damaged_commits.empty(),
               "a problem names a damaged commit");

    auto image = stored_image(store, commit_id);
    if (image && image->has_value()) {
      UniqueFd file(::open(scratch().c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
      FUZZ_CHECK(file.valid(), "the scratch directory takes an anonymous file");
      (void)restore_image(store, **image, file.get(), *lock);
    }

    std::string destination = scratch() + "/restore";
    FUZZ_CHECK(::mkdir(destination.c_str(), 0700) == 0, "the restore target is new");
    auto restored = restore_commit(store, commit_id, destination, {"restoring", 1, nullptr}, *lock);
    if (::getenv("ROSETCTL_FUZZ_VERBOSE") != nullptr) {
      std::fprintf(stderr, "verify: %zu problems%s%s; restore: %s\n", report->problems.size(),
                   report->problems.empty() ? "" : ", first: ",
                   report->problems.empty() ? "" : report->problems.front().c_str(),
                   restored ? "ok" : restored.status().message().c_str());
    }
    if (restored) {
      // A commit whose counts disagree with its tree is reported by verification, but its
      // objects are intact and restore; anything else verification finds stops a restore.
      FUZZ_CHECK(commit.has_value(), "only a readable commit restores");
      for (const std::string& problem : report->problems) {
        FUZZ_CHECK(problem.find(" says ") != std::string::npos, "only a sound commit restores");
      }
    }
    check_nothing_escaped();
    fs::remove_all(destination);

    // What a node pulling this snapshot from another would receive: the same bytes.
    auto receiver = ObjectReceiver::open(store, "node \"fuzz\"");
    FUZZ_CHECK(receiver.has_value(), "the scratch store takes a staging directory");
    (void)receiver->commit(commit_id, commit_text);
    (void)receiver->tree(tree_id, tree_text);
    // And in chunks, as a stream brings them: the tree's text through its bounded staging file.
    if (receiver->expect_text(ObjectReceiver::TextKind::kTree, tree_id).is_ok()) {
      auto size = static_cast<int64_t>(tree_text.size());
      std::size_t half = tree_text.size() / 2;
      if (receiver
              ->text_chunk(ObjectReceiver::TextKind::kTree, tree_id, 0,
                           std::string_view(tree_text).substr(0, half), size)
              .is_ok()) {
        (void)receiver->text_chunk(ObjectReceiver::TextKind::kTree, tree_id,
                                   static_cast<int64_t>(half),
                                   std::string_view(tree_text).substr(half), size);
      }
      (void)receiver->tree(tree_id);
    }
    receiver->expect_blob(blob_id, static_cast<int64_t>(blob.size()));
    (void)receiver->blob_chunk(blob_id, 0, blob, static_cast<int64_t>(blob.size()));
    (void)receiver->flush();
  }

  auto exclusive = store.lock_exclusive(std::chrono::milliseconds(0));
  FUZZ_CHECK(exclusive.has_value(), "the scratch store's lock is free again");
  (void)collect_garbage(store, *exclusive);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned flags = data[0];
  std::string_view rest = fuzz::as_text(data + 1, size - 1);
  std::size_t first = rest.find('\0');
  std::size_t second = first == std::string_view::npos ? first : rest.find('\0', first + 1);
  std::string commit_text(rest.substr(0, first));
  std::string tree_text = first == std::string_view::npos
                              ? ""
                              : std::string(rest.substr(first + 1, second - first - 1));
  std::string blob = second == std::string_view::npos ? "" : std::string(rest.substr(second + 1));

  const std::string blob_id = sha256_hex(blob);
  replace_all(tree_text, "@blob", blob_id);
  const std::string tree_id = sha256_hex(tree_text);
  replace_all(commit_text, "@tree", tree_id);
  const std::string commit_id = sha256_hex(commit_text);

  const std::string root = scratch() + "/store";
  fs::remove_all(root);
  auto store = CommitStore::open(root);
  FUZZ_CHECK(store.has_value(), "a scratch store opens");

  std::string stored_tree = tree_text, stored_commit = commit_text, stored_blob = blob;
  if (flags & 1) flip_last_byte(stored_tree);
  if (flags & 2) flip_last_byte(stored_commit);
  if (flags & 4) flip_last_byte(stored_blob);
  if (flags & 8) stored_blob.resize(stored_blob.size() / 2);
  write_object(fmt::format("{}/trees/{}/{}", root, tree_id.substr(0, 2), tree_id), stored_tree);
  write_object(fmt::format("{}/commits/{}", root, commit_id), stored_commit);
  write_object(fmt::format("{}/blobs/{}/{}", root, blob_id.substr(0, 2), blob_id), stored_blob);

  read_everything(**store, commit_id, tree_id, blob_id, tree_text, commit_text, blob);
  return 0;
}
