// Tests for src/core/commit_store/restore.cc: a restore or clone recreates exactly what was
// committed (checked by committing the result again: equal trees mean equal paths, types,
// modes, owners, mtimes, xattrs, link targets and contents), independent of its source.
#include "core/commit_store/restore.h"

#include <catch2/catch.hpp>

#include "core/commit_store/commit_directory.h"
#include "core/commit_store/sha256.h"
#include "core/commit_store/tree_diff.h"
#include "unit/core/commit_store/sample_volume.h"
#include "unit/core/commit_store/stored_object.h"

using namespace rosetctl;
using namespace rosetctl::testing;

namespace {

struct Fixture {
  ScratchDir scratch;
  std::unique_ptr<CommitStore> store;

  Fixture() {
    auto opened = CommitStore::open(scratch / "store");
    REQUIRE(opened.has_value());
    store = std::move(*opened);
  }

  CommitOutcome commit(const std::string& dir, const std::string& volume_id) {
    auto lock = store->lock_shared(std::chrono::seconds(1));
    REQUIRE(lock.has_value());
    auto outcome = commit_directory(*store, {dir, volume_id, "v", "", "", 1, 2}, *lock);
    REQUIRE(outcome.has_value());
    return *outcome;
  }

  // The differences between what `dir` holds now and commit `id`'s tree.
  std::vector<TreeChange> differences(const std::string& dir, const std::string& id) {
    CommitOutcome now = commit(dir, "local-check");
    auto expected = store->read_tree(store->read_commit(id)->tree);
    auto actual = store->read_tree(now.commit.tree);
    REQUIRE(expected.has_value());
    REQUIRE(actual.has_value());
    return diff_trees(*expected, *actual);
  }
};

std::string describe(const std::vector<TreeChange>& changes) {
  std::string text;
  for (const TreeChange& change : changes) {
    text += "\"" + change.path + "\":";
    for (const std::string& aspect : change.aspects)
      text += " " + aspect;
    text += "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("a restored commit equals the committed directory", "[commit_store]") {
  Fixture f;
  std::string source = f.scratch / "source";
  make_dir(source, 0777);
  fill_sample_volume(source);
  set_mtime(source, 1'200'000'000, 5);
  CommitOutcome committed = f.commit(source, "local-src");

  std::string restored = f.scratch / "restored";
  make_dir(restored, 0700);
  {
    auto lock = f.store->lock_shared(std::chrono::seconds(1));
    REQUIRE(lock.has_value());
    auto outcome = restore_commit(*f.store, committed.id, restored, {"restore", 2}, *lock);
    REQUIRE(outcome.has_value());
    CHECK(outcome->files == committed.commit.files);
  }
  auto changes = f.differences(restored, committed.id);
  INFO(describe(changes));
  CHECK(changes.empty());

  // Independent of the store: no shared inode, a hard link inside the volume kept.
  struct stat plain, hard;
  REQUIRE(::stat((restored + "/plain.txt").c_str(), &plain) == 0);
  REQUIRE(::stat((restored + "/zz-hardlink").c_str(), &hard) == 0);
  CHECK(plain.st_ino == hard.st_ino);
  CHECK(plain.st_nlink == 2);
  write_file(restored + "/plain.txt", "changed in the restored volume");
  CHECK(read_file(source + "/plain.txt") == "hello\n");
  struct stat sparse;
  REQUIRE(::stat((restored + "/sparse.bin").c_str(), &sparse) == 0);
  CHECK(sparse.st_blocks * 512 < (1 << 20));
}

TEST_CASE("a clone of a directory equals it", "[commit_store]") {
  Fixture f;
  std::string source = f.scratch / "source";
  make_dir(source, 0777);
  fill_sample_volume(source);
  CommitOutcome committed = f.commit(source, "local-src");
  std::string clone = f.scratch / "clone";
  make_dir(clone, 0700);
  auto outcome = clone_directory(source, clone, {"clone", 2});
  REQUIRE(outcome.has_value());
  auto changes = f.differences(clone, committed.id);
  INFO(describe(changes));
  CHECK(changes.empty());
}

TEST_CASE("restoring a commit whose blob is missing fails and names it", "[commit_store]") {
  Fixture f;
  std::string source = f.scratch / "source";
  make_dir(source, 0777);
  write_file(source + "/a", "content of a");
  CommitOutcome committed = f.commit(source, "local-src");
  auto tree = f.store->read_tree(committed.commit.tree);
  for (const TreeEntry& entry : tree->entries) {
    if (entry.type == EntryType::kRegular) REQUIRE(f.store->remove_blob(entry.content).is_ok());
  }
  std::string restored = f.scratch / "restored";
  make_dir(restored, 0700);
  auto lock = f.store->lock_shared(std::chrono::seconds(1));
  auto outcome = restore_commit(*f.store, committed.id, restored, {"restore", 1}, *lock);
  REQUIRE_FALSE(outcome.has_value());
  // The commit exists; what it needs is gone.
  CHECK(outcome.status().code() == Code::kDataLoss);
  CHECK(outcome.status().message().find("file \"a\"") != std::string::npos);
  CHECK(outcome.status().message().find(sha256_hex("content of a")) != std::string::npos);
}

TEST_CASE("restoring a commit whose blob is damaged fails with DATA_LOSS naming file and blob",
          "[commit_store]") {
  Fixture f;
  std::string source = f.scratch / "source";
  make_dir(source, 0777);
  // Longer than one read buffer, so the damage is found in a later chunk of the copy.
  std::string big(3 << 20, 'b');
  write_file(source + "/big", big);
  for (int i = 0; i < 8; ++i)
    write_file(source + "/small" + std::to_string(i), "intact " + std::to_string(i));
  CommitOutcome committed = f.commit(source, "local-src");
  damage_middle(object_path(f.scratch / "store", "blobs", sha256_hex(big)));
  for (int workers : {1, 2}) {
    std::string restored = f.scratch / ("restored" + std::to_string(workers));
    make_dir(restored, 0700);
    auto lock = f.store->lock_shared(std::chrono::seconds(1));
    auto outcome = restore_commit(*f.store, committed.id, restored, {"restore", workers}, *lock);
    REQUIRE_FALSE(outcome.has_value());
    CHECK(outcome.status().code() == Code::kDataLoss);
    CHECK(outcome.status().message().find("file \"big\"") != std::string::npos);
    CHECK(outcome.status().message().find(sha256_hex(big)) != std::string::npos);
    CHECK(outcome.status().message().find("corrupt") != std::string::npos);
  }
}

TEST_CASE("a restore over one made ahead moves its unchanged files and equals the commit",
          "[commit_store]") {
  Fixture f;
  std::string source = f.scratch / "source";
  make_dir(source, 0777);
  fill_sample_volume(source);
  write_file(source + "/kept.bin", std::string(100000, 'k'));
  write_file(source + "/tampered.bin", std::string(5000, 't'));
  write_file(source + "/removed.bin", "gone later");
  CommitOutcome earlier = f.commit(source, "local-src");
  std::string ahead = f.scratch / "ahead";
  make_dir(ahead, 0700);
  auto lock = f.store->lock_shared(std::chrono::seconds(1));
  REQUIRE(lock.has_value());
  REQUIRE(restore_commit(*f.store, earlier.id, ahead, {"ahead", 2}, *lock).has_value());
  struct stat kept_ahead;
  REQUIRE(::stat((ahead + "/kept.bin").c_str(), &kept_ahead) == 0);

  // The volume moves on: one file changed, one new, one removed, the rest as it was.
  write_file(source + "/empty", "no longer empty");
  write_file(source + "/added.bin", "new");
  REQUIRE(::unlink((source + "/removed.bin").c_str()) == 0);
  CommitOutcome later = f.commit(source, "local-src");
  // Changed where it was made ahead (its mtime moved): copied from the store, not taken.
  write_file(ahead + "/tampered.bin", std::string(5000, 'X'));

  std::string restored = f.scratch / "restored";
  make_dir(restored, 0700);
  RestoreOptions options{"restore", 2};
  options.reuse_directory = ahead;
  options.reuse_commit = earlier.id;
  auto outcome = restore_commit(*f.store, later.id, restored, options, *lock);
  REQUIRE(outcome.has_value());
  auto changes = f.differences(restored, later.id);
  INFO(describe(changes));
  CHECK(changes.empty());
  CHECK(read_file(restored + "/tampered.bin") == std::string(5000, 't'));
  // Taken, not copied: the same inode, gone from where it was made ahead. Not taken: the changed
  // file, the new one, the tampered one, the hard-linked pair (plain.txt, zz-hardlink).
  struct stat kept;
  REQUIRE(::stat((restored + "/kept.bin").c_str(), &kept) == 0);
  CHECK(kept.st_ino == kept_ahead.st_ino);
  CHECK(::access((ahead + "/kept.bin").c_str(), F_OK) != 0);
  CHECK(outcome->reused_files == 4);  // kept.bin, sparse.bin, nested/setuid and the odd name
}
