// Tests for src/core/commit_store/object_receiver.cc: what arrives from another store is stored
// only when it hashes to its name, and a blob cut off halfway resumes from what was kept.
#include "core/commit_store/object_receiver.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "core/commit_store/sha256.h"
#include "unit/core/commit_store/scratch_dir.h"

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

  auto got = receiver->blob_chunk(id, 0, damaged, static_cast<int64_t>(damaged.size()));
  REQUIRE_FALSE(got.has_value());
  CHECK(got.status().code() == Code::kDataLoss);
  CHECK_THAT(got.status().message(), Catch::Contains("blob " + id) &&
                                         Catch::Contains("node \"a\"") &&
                                         Catch::Contains("not stored"));
  CHECK_FALSE((*store)->has_blob(id));
  CHECK(receiver->partial_size(id) == 0);  // not kept for a resume either

  // Sent again intact, it is stored.
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
    auto part = receiver->blob_chunk(id, 0, std::string_view(content).substr(0, 1 << 20), size);
    REQUIRE(part.has_value());
    CHECK_FALSE(*part);
  }  // the transfer stops here: the source went away
  auto receiver = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(receiver.has_value());
  REQUIRE(receiver->partial_size(id) == (1 << 20));
  CHECK_FALSE((*store)->has_blob(id));
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
    REQUIRE(
        receiver->blob_chunk(id, 0, std::string_view(content).substr(0, 1000), size).has_value());
    // While it receives, another transfer of the same blob into this store is turned away.
    auto other = ObjectReceiver::open(**store, "node \"c\"");
    REQUIRE(other.has_value());
    CHECK(other->blob_chunk(id, 0, "x", size).status().code() == Code::kAborted);
  }
  std::string part_path = (*store)->root() + "/incoming/" + id + ".part";
  write_file(part_path, std::string(1000, 'z'));  // the kept part, damaged on disk

  auto fresh = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(fresh.has_value());
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
