// Tests for src/core/commit_store/commit_directory.cc: what a commit captures, incremental
// re-commits through the stat cache, deduplication, and commit identity.
#include "core/commit_store/commit_directory.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "core/commit_store/sha256.h"
#include "core/commit_store/store_gc.h"
#include "unit/core/commit_store/sample_volume.h"
#include "unit/core/commit_store/stored_object.h"

using namespace rosetctl;
using namespace rosetctl::testing;

namespace {

struct Fixture {
  ScratchDir scratch;
  std::unique_ptr<CommitStore> store;
  std::string volume = scratch / "volume";

  Fixture() {
    auto opened = CommitStore::open(scratch / "store");
    REQUIRE(opened.has_value());
    store = std::move(*opened);
    make_dir(volume, 0777);
  }

  CommitOutcome commit(const std::string& dir, const std::string& volume_id,
                       const std::string& parent = "") {
    auto lock = store->lock_shared(std::chrono::seconds(1));
    REQUIRE(lock.has_value());
    CommitRequest request{dir, volume_id, "demo", parent, "a message", 1'700'000'000'000'000'000,
                          2};
    auto outcome = commit_directory(*store, request, *lock);
    REQUIRE(outcome.has_value());
    return *outcome;
  }
};

}  // namespace

TEST_CASE("a commit records every entry and stores each content once", "[commit_store]") {
  Fixture f;
  fill_sample_volume(f.volume);
  CommitOutcome outcome = f.commit(f.volume, "local-1");
  CHECK(is_digest_hex(outcome.id));
  auto tree = f.store->read_tree(outcome.commit.tree);
  REQUIRE(tree.has_value());
  std::map<std::string, TreeEntry> by_path;
  for (const TreeEntry& entry : tree->entries)
    by_path[entry.path] = entry;
  CHECK(by_path.at("").type == EntryType::kDirectory);
  CHECK(by_path.at("plain.txt").content == sha256_hex("hello\n"));
  CHECK(by_path.at("plain.txt").mtime_ns == 1'600'000'000'123'456'789);
  CHECK(by_path.at("plain.txt").xattrs == std::vector<Xattr>{{"user.checkpoint", "epoch=3"}});
  CHECK(by_path.at("zz-hardlink").type == EntryType::kHardlink);
  CHECK(by_path.at("zz-hardlink").target == "plain.txt");
  CHECK(by_path.at("nested/link").target == "../plain.txt");
  CHECK(by_path.at("nested/setuid").mode == 04755);
  CHECK(by_path.at("fifo").type == EntryType::kFifo);
  CHECK(by_path.at("nested/deeper/name with spaces\nand a newline").size == 8);
  CHECK(by_path.at("sparse.bin").size == (8 << 20) + 4);
  CHECK(outcome.commit.files == 5);  // plain, empty, odd name, setuid, sparse; hard link once
  CHECK(f.store->has_blob(sha256_hex("hello\n")));
  CHECK(outcome.new_bytes == outcome.commit.bytes);
}

TEST_CASE("a re-commit reads only what changed and stores nothing new", "[commit_store]") {
  Fixture f;
  for (int i = 0; i < 20; ++i)
    write_file(f.volume + "/file" + std::to_string(i), std::string(1000, 'a' + i));
  // Make the files older than the racy window so the cache trusts them.
  for (int i = 0; i < 20; ++i)
    set_mtime(f.volume + "/file" + std::to_string(i), 1'600'000'000, 0);
  ::usleep(150'000);
  CommitOutcome first = f.commit(f.volume, "local-1");
  CHECK(first.reused_files == 0);
  CommitOutcome again = f.commit(f.volume, "local-1", first.id);
  CHECK(again.reused_files == 20);
  CHECK(again.new_bytes == 0);
  CHECK(again.commit.tree == first.commit.tree);
  CHECK(again.commit.parent == first.id);
  CHECK(again.id != first.id);

  write_file(f.volume + "/file3", "changed");
  CommitOutcome third = f.commit(f.volume, "local-1", again.id);
  CHECK(third.reused_files == 19);
  CHECK(third.new_bytes == 7);
  CHECK(third.commit.tree != first.commit.tree);
}

TEST_CASE("equal content in two volumes shares the tree but not the commit", "[commit_store]") {
  Fixture f;
  std::string other = f.scratch / "other";
  make_dir(other, 0777);
  for (const std::string& dir : {f.volume, other}) {
    write_file(dir + "/weights.bin", std::string(100000, 'w'));
    set_mtime(dir + "/weights.bin", 1'600'000'000, 0);
    set_mtime(dir, 1'600'000'000, 0);
  }
  CommitOutcome a = f.commit(f.volume, "local-a");
  CommitOutcome b = f.commit(other, "local-b");
  CHECK(a.commit.tree == b.commit.tree);
  CHECK(a.id != b.id);
  CHECK(b.new_bytes == 0);
}

TEST_CASE("a commit stores its content over a damaged blob of that name instead of trusting it",
          "[commit_store]") {
  Fixture f;
  std::string content(300000, 'd');
  write_file(f.volume + "/data", content);
  CommitOutcome first = f.commit(f.volume, "local-1");
  std::string blob = object_path(f.scratch / "store", "blobs", sha256_hex(content));
  damage_middle(blob);
  std::string other = f.scratch / "other";
  make_dir(other, 0777);
  write_file(other + "/copy", content);
  CommitOutcome second = f.commit(other, "local-2");
  CHECK(second.new_bytes ==
        0);  // the store did not grow: the good copy took the damaged one's place
  CHECK(read_file(blob) == content);
  struct stat st;
  REQUIRE(::stat(blob.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
  // No leftover from the replacement next to the blob.
  std::size_t names = 0;
  for (const auto& entry : std::filesystem::directory_iterator(blob.substr(0, blob.rfind('/'))))
    names += entry.is_regular_file() ? 1 : 0;
  CHECK(names == 1);
}

TEST_CASE("a commit whose tree equals a damaged stored tree stores the tree again",
          "[commit_store]") {
  Fixture f;
  std::string other = f.scratch / "other";
  make_dir(other, 0777);
  for (const std::string& dir : {f.volume, other}) {
    write_file(dir + "/weights.bin", std::string(1000, 'w'));
    set_mtime(dir + "/weights.bin", 1'600'000'000, 0);
    set_mtime(dir, 1'600'000'000, 0);
  }
  CommitOutcome a = f.commit(f.volume, "local-a");
  damage_middle(object_path(f.scratch / "store", "trees", a.commit.tree));
  REQUIRE(f.store->read_tree(a.commit.tree).status().code() == Code::kDataLoss);
  CommitOutcome b = f.commit(other, "local-b");
  CHECK(b.commit.tree == a.commit.tree);
  CHECK(f.store->read_tree(a.commit.tree).has_value());
}

TEST_CASE("a cached hash whose blob was collected is not reused", "[commit_store]") {
  Fixture f;
  write_file(f.volume + "/data", "payload");
  set_mtime(f.volume + "/data", 1'600'000'000, 0);
  ::usleep(150'000);  // past the racy window, so the cache holds the file
  CommitOutcome first = f.commit(f.volume, "local-1");
  // The snapshot is deleted and collected: its commit (the cache's anchor) and blob are gone.
  REQUIRE(f.store->remove_commit(first.id).is_ok());
  {
    auto lock = f.store->lock_exclusive(std::chrono::seconds(1));
    REQUIRE(lock.has_value());
    auto report = collect_garbage(*f.store, *lock);
    REQUIRE(report.has_value());
    REQUIRE(report->blobs_removed == 1);
  }
  REQUIRE_FALSE(f.store->has_blob(sha256_hex("payload")));
  CommitOutcome again = f.commit(f.volume, "local-1", first.id);
  CHECK(again.reused_files == 0);
  CHECK(f.store->has_blob(sha256_hex("payload")));
}

TEST_CASE("a re-commit sees an xattr change on a file whose content and mtime did not change",
          "[commit_store]") {
  Fixture f;
  for (const char* name : {"kept", "tagged"}) {
    write_file(f.volume + "/" + name, name);
    set_mtime(f.volume + "/" + name, 1'600'000'000, 0);
  }
  ::usleep(150'000);
  CommitOutcome first = f.commit(f.volume, "local-1");
  // setxattr moves the ctime only: content, size and mtime stay as they were.
  REQUIRE(::setxattr((f.volume + "/tagged").c_str(), "user.epoch", "7", 1, 0) == 0);
  CommitOutcome again = f.commit(f.volume, "local-1", first.id);
  CHECK(again.reused_files == 1);
  auto tree = f.store->read_tree(again.commit.tree);
  REQUIRE(tree.has_value());
  for (const TreeEntry& entry : tree->entries) {
    if (entry.path == "tagged") CHECK(entry.xattrs == std::vector<Xattr>{{"user.epoch", "7"}});
    if (entry.path == "kept") CHECK(entry.xattrs.empty());
  }
  // And the xattr, now cached with the file's new version, stays in later commits.
  ::usleep(150'000);
  CommitOutcome third = f.commit(f.volume, "local-1", again.id);
  CommitOutcome fourth = f.commit(f.volume, "local-1", third.id);
  CHECK(fourth.reused_files == 2);
  CHECK(fourth.commit.tree == again.commit.tree);
}
