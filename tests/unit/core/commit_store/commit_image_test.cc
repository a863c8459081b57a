// Tests for src/core/commit_store/commit_image.cc: an image becomes one blob under a commit
// that names its kind, comes back byte for byte with its holes, and shares storage when equal.
#include "core/commit_store/commit_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/commit_store/sha256.h"
#include "core/commit_store/store_gc.h"
#include "core/commit_store/store_verify.h"
#include "unit/core/commit_store/stored_object.h"

using namespace rosetctl;
using namespace rosetctl::testing;

namespace {

constexpr int64_t kImageBytes = 8 << 20;

// A sparse 8 MiB "image": data at 0 and at 5 MiB, holes elsewhere.
void make_image(const std::string& path, const std::string& marker) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600));
  REQUIRE(fd.valid());
  REQUIRE(::ftruncate(fd.get(), kImageBytes) == 0);
  REQUIRE(::pwrite(fd.get(), marker.data(), marker.size(), 0) ==
          static_cast<ssize_t>(marker.size()));
  REQUIRE(::pwrite(fd.get(), "tail", 4, 5 << 20) == 4);
}

CommitOutcome commit(const CommitStore& store, const std::string& path, const std::string& kind) {
  auto lock = store.lock_shared(std::chrono::seconds(1));
  REQUIRE(lock.has_value());
  UniqueFd image(::open(path.c_str(), O_RDONLY));
  REQUIRE(image.valid());
  auto copy = copy_image(store, image.get(), path);
  REQUIRE(copy.has_value());
  ImageCommitRequest request{kind, "local-img", "img", "", "m", 42, nullptr};
  auto outcome = commit_image_copy(store, std::move(*copy), request, *lock);
  REQUIRE(outcome.has_value());
  return *outcome;
}

}  // namespace

TEST_CASE("an image commit restores byte for byte with its holes", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  make_image(scratch / "a.img", "ext4 superblock stand-in");
  CommitOutcome outcome = commit(**store, scratch / "a.img", "ext4");
  CHECK(outcome.commit.image == "ext4");
  CHECK(outcome.commit.files == 1);
  CHECK(outcome.commit.bytes == kImageBytes);
  CHECK(outcome.new_bytes > 0);
  CHECK(outcome.new_bytes < kImageBytes);  // the holes were not stored

  auto stored = stored_image(**store, outcome.id);
  REQUIRE(stored.has_value());
  REQUIRE(stored->has_value());
  CHECK((*stored)->kind == "ext4");
  CHECK((*stored)->size == kImageBytes);
  CHECK((*stored)->blob == sha256_hex(read_file(scratch / "a.img")));

  UniqueFd restored(::open((scratch / "b.img").c_str(), O_RDWR | O_CREAT, 0600));
  REQUIRE(restored.valid());
  auto lock = (*store)->lock_shared(std::chrono::seconds(1));
  REQUIRE(lock.has_value());
  REQUIRE(restore_image(**store, **stored, restored.get(), *lock).is_ok());
  CHECK(read_file(scratch / "b.img") == read_file(scratch / "a.img"));
  struct stat st;
  REQUIRE(::fstat(restored.get(), &st) == 0);
  CHECK(st.st_blocks * 512 < kImageBytes);

  auto report = verify_commits(**store, {outcome.id}, 1, nullptr, *lock);
  REQUIRE(report.has_value());
  CHECK(report->problems.empty());
}

TEST_CASE("restoring an image whose blob is damaged fails with DATA_LOSS", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  make_image(scratch / "a.img", "ext4 superblock stand-in");
  CommitOutcome outcome = commit(**store, scratch / "a.img", "ext4");
  auto stored = stored_image(**store, outcome.id);
  REQUIRE(stored.has_value());
  REQUIRE(stored->has_value());
  damage_middle(object_path(scratch / "store", "blobs", (*stored)->blob));
  UniqueFd restored(::open((scratch / "b.img").c_str(), O_RDWR | O_CREAT, 0600));
  REQUIRE(restored.valid());
  auto lock = (*store)->lock_shared(std::chrono::seconds(1));
  REQUIRE(lock.has_value());
  Status status = restore_image(**store, **stored, restored.get(), *lock);
  CHECK(status.code() == Code::kDataLoss);
  CHECK(status.message().find((*stored)->blob) != std::string::npos);
  CHECK(status.message().find("corrupt") != std::string::npos);
}

TEST_CASE("a directory's commit holds no image; equal images share one blob", "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  make_image(scratch / "a.img", "same");
  CommitOutcome first = commit(**store, scratch / "a.img", "block");
  CommitOutcome second = commit(**store, scratch / "a.img", "block");
  CHECK(first.id == second.id);  // same content, volume, time and message
  CHECK(second.new_bytes == 0);

  make_dir(scratch / "dir");
  auto lock = (*store)->lock_shared(std::chrono::seconds(1));
  REQUIRE(lock.has_value());
  auto directory =
      commit_directory(**store, {scratch / "dir", "local-d", "d", "", "", 1, 1}, *lock);
  REQUIRE(directory.has_value());
  auto none = stored_image(**store, directory->id);
  REQUIRE(none.has_value());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("deleting an image commit frees its blob only when no other commit holds it",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  make_image(scratch / "a.img", "first");
  CommitOutcome first = commit(**store, scratch / "a.img", "ext4");
  make_image(scratch / "a.img", "second");
  CommitOutcome second = commit(**store, scratch / "a.img", "ext4");
  std::string first_blob = (*stored_image(**store, first.id))->blob;
  std::string second_blob = (*stored_image(**store, second.id))->blob;
  REQUIRE(first_blob != second_blob);

  REQUIRE((*store)->remove_commit(first.id).is_ok());
  auto lock = (*store)->lock_exclusive(std::chrono::seconds(1));
  REQUIRE(lock.has_value());
  auto report = collect_garbage(**store, *lock);
  REQUIRE(report.has_value());
  CHECK(report->blobs_removed == 1);
  CHECK(report->bytes_reclaimed > 0);
  CHECK_FALSE((*store)->has_blob(first_blob));
  CHECK((*store)->has_blob(second_blob));
}
