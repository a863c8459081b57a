// Tests for src/core/commit_store/store_gc.cc: what is reachable stays, the rest goes.
#include "core/commit_store/store_gc.h"

#include <catch2/catch.hpp>

#include "core/commit_store/commit_directory.h"
#include "core/commit_store/sha256.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using namespace rosetctl::testing;

namespace {

std::string commit(const CommitStore& store, const std::string& dir, const std::string& volume) {
  auto lock = store.lock_shared(std::chrono::seconds(1));
  REQUIRE(lock.has_value());
  auto outcome = commit_directory(store, {dir, volume, "v", "", "", 1, 1}, *lock);
  REQUIRE(outcome.has_value());
  return outcome->id;
}

}  // namespace

TEST_CASE("gc keeps blobs of live commits and removes the rest", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  make_dir(scratch / "a");
  make_dir(scratch / "b");
  write_file(scratch / "a/shared", "shared");
  write_file(scratch / "b/shared", "shared");
  write_file(scratch / "a/only-a", "only in a");
  std::string a = commit(**store, scratch / "a", "local-a");
  std::string b = commit(**store, scratch / "b", "local-b");

  REQUIRE((*store)->remove_commit(a).is_ok());
  {
    auto lock = (*store)->lock_exclusive(std::chrono::seconds(1));
    REQUIRE(lock.has_value());
    auto report = collect_garbage(**store, *lock);
    REQUIRE(report.has_value());
    CHECK(report->commits == 1);
    CHECK(report->blobs_removed == 1);
    CHECK(report->trees_removed == 1);
  }
  CHECK((*store)->has_blob(sha256_hex("shared")));
  CHECK_FALSE((*store)->has_blob(sha256_hex("only in a")));
  CHECK((*store)->read_tree((*store)->read_commit(b)->tree).has_value());
}

TEST_CASE("gc refuses to run without the exclusive lock or while a commit holds it shared",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto shared = (*store)->lock_shared(std::chrono::seconds(1));
  REQUIRE(shared.has_value());
  auto report = collect_garbage(**store, *shared);
  REQUIRE_FALSE(report.has_value());
  CHECK(report.status().code() == Code::kFailedPrecondition);
  auto exclusive = (*store)->lock_exclusive(std::chrono::milliseconds(50));
  REQUIRE_FALSE(exclusive.has_value());
  CHECK(exclusive.status().code() == Code::kAborted);
}

TEST_CASE("gc stops without removing anything when a commit is unreadable", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  make_dir(scratch / "a");
  write_file(scratch / "a/file", "data");
  std::string a = commit(**store, scratch / "a", "local-a");
  std::string path = scratch / "store/commits/" + a;
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  write_file(path, "garbage");
  auto lock = (*store)->lock_exclusive(std::chrono::seconds(1));
  REQUIRE(lock.has_value());
  auto report = collect_garbage(**store, *lock);
  REQUIRE_FALSE(report.has_value());
  CHECK(report.status().code() == Code::kDataLoss);
  CHECK((*store)->has_blob(sha256_hex("data")));
}
