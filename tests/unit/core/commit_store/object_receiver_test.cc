// Tests for src/core/commit_store/object_receiver.cc: what arrives from another store is stored
// only when it hashes to its name, and a blob cut off halfway resumes from what was kept.
#include "core/commit_store/object_receiver.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "core/commit_store/sha256.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using namespace rosetctl::testing;

namespace {

std::string pattern(std::size_t size) {
  std::string text(size, '\0');
  for (std::size_t i = 0; i < size; ++i)
    text[i] = static_cast<char>('a' + (i * 7 + i / 13) % 26);
  return text;
}

std::string stored_blob(const CommitStore& store, const std::string& id) {
  return read_file(store.root() + "/blobs/" + id.substr(0, 2) + "/" + id);
}

}  // namespace

TEST_CASE("a blob received in chunks is verified and stored under its name", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(receiver.has_value());
  std::string content = pattern(300000);
  std::string id = sha256_hex(content);
  auto size = static_cast<int64_t>(content.size());
  receiver->expect_blob(id, size);

  auto first = receiver->blob_chunk(id, 0, std::string_view(content).substr(0, 100000), size);
  REQUIRE(first.has_value());
  CHECK_FALSE(*first);
  CHECK_FALSE((*store)->has_blob(id));  // nothing under a real name until it is whole
  auto rest = receiver->blob_chunk(id, 100000, std::string_view(content).substr(100000), size);
  REQUIRE(rest.has_value());
  CHECK(*rest);
  CHECK_FALSE((*store)->has_blob(id));  // verified; named at the flush, once on disk
  REQUIRE(receiver->flush().is_ok());
  CHECK((*store)->has_blob(id));
  CHECK(stored_blob(**store, id) == content);
  CHECK(receiver->partial_size(id) == 0);  // the staged part is gone
}

TEST_CASE("a corrupt blob is refused with DATA_LOSS naming it and never stored", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(receiver.has_value());
  std::string content = pattern(5000);
  std::string id = sha256_hex(content);
  std::string damaged = content;
  damaged[4321] ^= 0x01;
  receiver->expect_blob(id, static_cast<int64_t>(content.size()));

  auto got = receiver->blob_chunk(id, 0, damaged, static_cast<int64_t>(damaged.size()));
  REQUIRE_FALSE(got.has_value());
  CHECK(got.status().code() == Code::kDataLoss);
  CHECK_THAT(got.status().message(), Catch::Contains("blob " + id) &&
                                         Catch::Contains("node \"a\"") &&
                                         Catch::Contains("not stored"));
  CHECK_FALSE((*store)->has_blob(id));
  CHECK(receiver->partial_size(id) == 0);  // not kept for a resume either

  // Asked for and sent again intact, it is stored.
  receiver->expect_blob(id, static_cast<int64_t>(content.size()));
  auto again = receiver->blob_chunk(id, 0, content, static_cast<int64_t>(content.size()));
  REQUIRE(again.has_value());
  CHECK(*again);
  REQUIRE(receiver->flush().is_ok());
  CHECK(stored_blob(**store, id) == content);
}

TEST_CASE("an interrupted blob resumes from the part kept, in a new receiver", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  std::string content = pattern(2 * 1024 * 1024 + 17);
  std::string id = sha256_hex(content);
  auto size = static_cast<int64_t>(content.size());
  {
    auto receiver = ObjectReceiver::open(**store, "node \"a\"");
    REQUIRE(receiver.has_value());
    receiver->expect_blob(id, size);
    auto part = receiver->blob_chunk(id, 0, std::string_view(content).substr(0, 1 << 20), size);
    REQUIRE(part.has_value());
    CHECK_FALSE(*part);
  }  // the transfer stops here: the source went away
  auto receiver = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(receiver.has_value());
  REQUIRE(receiver->partial_size(id) == (1 << 20));
  CHECK_FALSE((*store)->has_blob(id));
  receiver->expect_blob(id, size);
  // Resuming somewhere else than where the kept part ends is refused, not spliced.
  auto wrong = receiver->blob_chunk(id, 12345, "x", size);
  REQUIRE_FALSE(wrong.has_value());
  CHECK(wrong.status().code() == Code::kFailedPrecondition);

  auto resumed = receiver->blob_chunk(id, 1 << 20, std::string_view(content).substr(1 << 20), size);
  REQUIRE(resumed.has_value());
  CHECK(*resumed);
  REQUIRE(receiver->flush().is_ok());
  CHECK(stored_blob(**store, id) == content);
}

TEST_CASE("a resumed blob whose kept part was damaged is refused and starts over",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  std::string content = pattern(4096);
  std::string id = sha256_hex(content);
  auto size = static_cast<int64_t>(content.size());
  {
    auto receiver = ObjectReceiver::open(**store, "node \"a\"");
    REQUIRE(receiver.has_value());
    receiver->expect_blob(id, size);
    REQUIRE(
        receiver->blob_chunk(id, 0, std::string_view(content).substr(0, 1000), size).has_value());
    // While it receives, another transfer of the same blob into this store is turned away.
    auto other = ObjectReceiver::open(**store, "node \"c\"");
    REQUIRE(other.has_value());
    other->expect_blob(id, size);
    CHECK(other->blob_chunk(id, 0, "x", size).status().code() == Code::kAborted);
  }
  std::string part_path = (*store)->root() + "/incoming/" + id + ".part";
  write_file(part_path, std::string(1000, 'z'));  // the kept part, damaged on disk

  auto fresh = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(fresh.has_value());
  fresh->expect_blob(id, size);
  auto resumed = fresh->blob_chunk(id, 1000, std::string_view(content).substr(1000), size);
  REQUIRE_FALSE(resumed.has_value());
  CHECK(resumed.status().code() == Code::kDataLoss);
  CHECK_FALSE((*store)->has_blob(id));
  CHECK(fresh->partial_size(id) == 0);
}

TEST_CASE("an empty blob arrives as one empty chunk", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(receiver.has_value());
  std::string id = sha256_hex("");
  receiver->expect_blob(id, 0);
  auto got = receiver->blob_chunk(id, 0, "", 0);
  REQUIRE(got.has_value());
  CHECK(*got);
  REQUIRE(receiver->flush().is_ok());
  CHECK((*store)->has_blob(id));
}

TEST_CASE("trees and commits are checked against their ids before they are stored",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(receiver.has_value());
  Tree tree;
  TreeEntry root;
  root.path = "";
  root.type = EntryType::kDirectory;
  root.mode = 0755;
  TreeEntry file;
  file.path = "f";
  file.mode = 0644;
  file.size = 5;
  file.content = sha256_hex("hello");
  tree.entries = {root, file};
  std::string text = serialize_tree(tree);
  std::string tree_id = sha256_hex(text);

  std::string damaged = text;
  damaged[damaged.size() / 2] ^= 0x02;
  auto refused = receiver->tree(tree_id, damaged);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().code() == Code::kDataLoss);
  CHECK_THAT(refused.status().message(), Catch::Contains("tree " + tree_id));
  CHECK_FALSE((*store)->read_tree(tree_id).has_value());

  auto accepted = receiver->tree(tree_id, text);
  REQUIRE(accepted.has_value());
  CHECK(accepted->entries.size() == 2);
  CHECK((*store)->read_tree(tree_id).has_value());

  CommitObject commit{tree_id, "", "local-1", "v", 1, 1, 5, "m", ""};
  std::string commit_text = serialize_commit(commit);
  std::string commit_id = sha256_hex(commit_text);
  std::string bad = commit_text;
  bad[3] ^= 0x04;
  auto bad_commit = receiver->commit(commit_id, bad);
  REQUIRE_FALSE(bad_commit.has_value());
  CHECK(bad_commit.status().code() == Code::kDataLoss);
  auto good = receiver->commit(commit_id, commit_text);
  REQUIRE(good.has_value());
  CHECK_FALSE((*store)->has_commit(commit_id));  // stored only when the caller says so
  REQUIRE(receiver->store_commit(commit_id, *good).is_ok());
  CHECK((*store)->has_commit(commit_id));
}

TEST_CASE("parts abandoned long ago are collected by a receiver alone, never beside another",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  std::string incoming = scratch / "store/incoming";
  REQUIRE(::mkdir(incoming.c_str(), 0700) == 0);
  std::string old_part = incoming + "/" + std::string(64, 'a') + ".part";
  std::string recent_part = incoming + "/" + std::string(64, 'b') + ".part";
  write_file(old_part, "abandoned");
  write_file(recent_part, "interrupted a moment ago");
  auto age = [&] {
    ::time_t long_ago = ::time(nullptr) - 2 * 86400;
    const ::timespec times[2] = {{long_ago, 0}, {long_ago, 0}};
    REQUIRE(::utimensat(AT_FDCWD, old_part.c_str(), times, 0) == 0);
  };
  auto exists = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  };
  {
    auto working = ObjectReceiver::open(**store, "node \"a\"");  // a transfer at work
    REQUIRE(working.has_value());
    age();
    // Another receiver beside it: the old part may be the one the first is about to resume.
    auto beside = ObjectReceiver::open(**store, "node \"b\"");
    REQUIRE(beside.has_value());
    CHECK(exists(old_part));
  }
  auto alone = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(alone.has_value());
  CHECK_FALSE(exists(old_part));
  CHECK(exists(recent_part));  // a retry resumes it
  CHECK(alone->partial_size(std::string(64, 'b')) == 24);
}

// --- A source that sends what it was not asked for, or more than it said ----------------------

namespace {

bool part_exists(const CommitStore& store, const std::string& id) {
  struct stat st;
  return ::stat((store.root() + "/incoming/" + id + ".part").c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("a blob not asked for is refused and nothing of it is written", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"evil\"");
  REQUIRE(receiver.has_value());
  std::string asked = pattern(100);
  receiver->expect_blob(sha256_hex(asked), 100);
  std::string other = pattern(50);
  std::string other_id = sha256_hex(other);  // a sound blob, just not one anybody wanted

  auto got = receiver->blob_chunk(other_id, 0, other, 50);
  REQUIRE_FALSE(got.has_value());
  CHECK(got.status().code() == Code::kDataLoss);
  CHECK_THAT(got.status().message(), Catch::Contains("node \"evil\" sent blob " + other_id) &&
                                         Catch::Contains("not asked for"));
  REQUIRE(receiver->flush().is_ok());
  CHECK_FALSE((*store)->has_blob(other_id));
  CHECK_FALSE(part_exists(**store, other_id));

  // Nor twice: a blob that arrived whole is no longer asked for.
  REQUIRE(receiver->blob_chunk(sha256_hex(asked), 0, asked, 100).has_value());
  CHECK(receiver->blob_chunk(sha256_hex(asked), 0, asked, 100).status().code() == Code::kDataLoss);
}

TEST_CASE("a blob said to be bigger than its tree says is refused at its first chunk",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"evil\"");
  REQUIRE(receiver.has_value());
  std::string content = "ten bytes!";
  std::string id = sha256_hex(content);
  receiver->expect_blob(id, 10);

  auto got = receiver->blob_chunk(id, 0, pattern(1 << 20), int64_t{1} << 40);
  REQUIRE_FALSE(got.has_value());
  CHECK(got.status().code() == Code::kDataLoss);
  CHECK_THAT(got.status().message(), Catch::Contains("blob " + id + " from node \"evil\"") &&
                                         Catch::Contains("1099511627776 bytes") &&
                                         Catch::Contains("its tree says 10"));
  CHECK_FALSE(part_exists(**store, id));
}

TEST_CASE("a blob whose chunks run past its size is refused and its part removed",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  std::string content = pattern(3000);
  std::string id = sha256_hex(content);
  {
    auto receiver = ObjectReceiver::open(**store, "node \"evil\"");
    REQUIRE(receiver.has_value());
    receiver->expect_blob(id, 3000);
    auto first = receiver->blob_chunk(id, 0, std::string_view(content).substr(0, 2000), 3000);
    REQUIRE(first.has_value());
    CHECK(part_exists(**store, id));
    // The next chunk would end at byte 4000 of a 3000-byte blob: the stream never ends.
    auto endless = receiver->blob_chunk(id, 2000, pattern(2000), 3000);
    REQUIRE_FALSE(endless.has_value());
    CHECK(endless.status().code() == Code::kDataLoss);
    CHECK_THAT(endless.status().message(),
               Catch::Contains("reaches past the 3000 bytes") && Catch::Contains("node \"evil\""));
    CHECK_FALSE(part_exists(**store, id));  // nothing left for an honest pull to trip over
    CHECK(receiver->blob_chunk(id, 2000, "x", 3000).status().code() == Code::kDataLoss);
  }
  // An honest source then sends it whole.
  auto honest = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(honest.has_value());
  CHECK(honest->partial_size(id) == 0);
  honest->expect_blob(id, 3000);
  auto whole = honest->blob_chunk(id, 0, content, 3000);
  REQUIRE(whole.has_value());
  CHECK(*whole);
  REQUIRE(honest->flush().is_ok());
  CHECK(stored_blob(**store, id) == content);
}

TEST_CASE("a part longer than its blob (left by an older rosetctl) is overwritten from byte 0",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  std::string content = "ten bytes!";
  std::string id = sha256_hex(content);
  REQUIRE(::mkdir((scratch / "store/incoming").c_str(), 0700) == 0);
  write_file(scratch / ("store/incoming/" + id + ".part"), pattern(300000));
  auto receiver = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(receiver.has_value());
  receiver->expect_blob(id, 10);
  auto whole = receiver->blob_chunk(id, 0, content, 10);
  REQUIRE(whole.has_value());
  CHECK(*whole);
  REQUIRE(receiver->flush().is_ok());
  CHECK(stored_blob(**store, id) == content);
}

TEST_CASE("a blob that begins before the one in flight is whole is refused", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"evil\"");
  REQUIRE(receiver.has_value());
  std::string one = pattern(1000);
  std::string two = pattern(2000);
  receiver->expect_blob(sha256_hex(one), 1000);
  receiver->expect_blob(sha256_hex(two), 2000);
  REQUIRE(receiver->blob_chunk(sha256_hex(one), 0, one.substr(0, 10), 1000).has_value());
  auto got = receiver->blob_chunk(sha256_hex(two), 0, two, 2000);
  REQUIRE_FALSE(got.has_value());
  CHECK(got.status().code() == Code::kDataLoss);
  CHECK_FALSE(part_exists(**store, sha256_hex(one)));
  CHECK_FALSE(part_exists(**store, sha256_hex(two)));
}

TEST_CASE("trees and commits arrive in chunks, only those asked for, within their bounds",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"evil\"");
  REQUIRE(receiver.has_value());
  using Kind = ObjectReceiver::TextKind;
  Tree tree;
  TreeEntry root;
  root.type = EntryType::kDirectory;
  root.mode = 0755;
  tree.entries = {root};
  std::string text = serialize_tree(tree);
  std::string id = sha256_hex(text);
  auto size = static_cast<int64_t>(text.size());

  // Not asked for: refused.
  auto unasked = receiver->text_chunk(Kind::kTree, id, 0, text, size);
  CHECK(unasked.code() == Code::kDataLoss);
  CHECK_THAT(unasked.message(), Catch::Contains("node \"evil\" sent tree " + id));

  // Asked for, in two chunks: verified and stored.
  REQUIRE(receiver->expect_text(Kind::kTree, id).is_ok());
  REQUIRE(receiver->text_chunk(Kind::kTree, id, 0, text.substr(0, 5), size).is_ok());
  REQUIRE(receiver->text_chunk(Kind::kTree, id, 5, text.substr(5), size).is_ok());
  auto got = receiver->tree(id);
  REQUIRE(got.has_value());
  CHECK((*store)->read_tree(id).has_value());

  // A commit said to be bigger than any commit of ours: refused at once, nothing received.
  std::string commit_id(64, 'c');
  REQUIRE(receiver->expect_text(Kind::kCommit, commit_id).is_ok());
  auto huge =
      receiver->text_chunk(Kind::kCommit, commit_id, 0, "x", ObjectReceiver::kMaxCommitBytes + 1);
  CHECK(huge.code() == Code::kDataLoss);
  CHECK_THAT(huge.message(), Catch::Contains("commit " + commit_id + " from node \"evil\""));
  // Refused for good: its later chunks are not taken either.
  CHECK(receiver->text_chunk(Kind::kCommit, commit_id, 0, "x", 1).code() == Code::kDataLoss);
  CHECK(receiver->commit(commit_id).status().code() == Code::kUnavailable);

  // A tree that goes on past the size it said: refused.
  std::string tree_id(64, 'd');
  REQUIRE(receiver->expect_text(Kind::kTree, tree_id).is_ok());
  REQUIRE(receiver->text_chunk(Kind::kTree, tree_id, 0, pattern(100), 150).is_ok());
  auto past = receiver->text_chunk(Kind::kTree, tree_id, 100, pattern(100), 150);
  CHECK(past.code() == Code::kDataLoss);
  CHECK_THAT(past.message(), Catch::Contains("more bytes arrived than the 150"));

  // One cut short: UNAVAILABLE (a retry fetches it again), never stored.
  std::string cut_id(64, 'e');
  REQUIRE(receiver->expect_text(Kind::kTree, cut_id).is_ok());
  REQUIRE(receiver->text_chunk(Kind::kTree, cut_id, 0, pattern(10), 20).is_ok());
  CHECK(receiver->tree(cut_id).status().code() == Code::kUnavailable);
  CHECK_FALSE((*store)->read_tree(cut_id).has_value());
}

TEST_CASE("a whole text over its bound is refused before it is hashed", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"evil\"");
  REQUIRE(receiver.has_value());
  std::string big(static_cast<std::size_t>(ObjectReceiver::kMaxCommitBytes) + 1, 'm');
  auto refused = receiver->commit(sha256_hex(big), big);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().code() == Code::kDataLoss);
  CHECK_THAT(refused.status().message(), Catch::Contains("over the limit of 262144"));
}

TEST_CASE("a tree of a million files under long paths fits the tree bound with room",
          "[commit_store]") {
  // A thousand entries as our own commit writes them (a 100-byte path, a regular file with its
  // size, time and hash, one xattr), scaled to a million: what kMaxTreeBytes must hold.
  Tree tree;
  TreeEntry root;
  root.type = EntryType::kDirectory;
  root.mode = 0755;
  tree.entries.push_back(root);
  for (int i = 0; i < 1000; ++i) {
    TreeEntry file;
    file.path = fmt::format("{}/{:06}", std::string(92, 'p'), i);
    file.mode = 0644;
    file.uid = 1000;
    file.gid = 1000;
    file.mtime_ns = 1'700'000'000'123'456'789;
    file.size = 123456789;
    file.content = sha256_hex(file.path);
    file.xattrs = {{"user.origin", "node-a"}};
    tree.entries.push_back(file);
  }
  auto million = static_cast<int64_t>(serialize_tree(tree).size()) * 1000;
  CHECK(million < ObjectReceiver::kMaxTreeBytes / 4);
}
