// Tests for ObjectReceiver::seed_part (src/core/commit_store/object_receiver.cc): a blob begun
// with an earlier version of its file (one appended to since) takes only the bytes after it, and
// is still stored only when the whole hashes to its name.
#include <catch2/catch.hpp>

#include "core/commit_store/object_receiver.h"
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

TEST_CASE("a blob begun with an earlier version of its file takes only the bytes after it",
          "[commit_store]") {
  ScratchDir scratch;
  auto store = CommitStore::open(scratch / "store");
  REQUIRE(store.has_value());
  auto receiver = ObjectReceiver::open(**store, "node \"a\"");
  REQUIRE(receiver.has_value());
  std::string earlier = pattern(300000);
  std::string earlier_id = sha256_hex(earlier);
  auto earlier_size = static_cast<int64_t>(earlier.size());
  receiver->expect_blob(earlier_id, earlier_size);
  REQUIRE(receiver->blob_chunk(earlier_id, 0, earlier, earlier_size).has_value());
  REQUIRE(receiver->flush().is_ok());

  SECTION("appended to: the rest completes it") {
    std::string appended = earlier + "and then some more lines\n";
    std::string id = sha256_hex(appended);
    auto size = static_cast<int64_t>(appended.size());
    auto seeded = receiver->seed_part(id, earlier_id);
    REQUIRE(seeded.has_value());
    CHECK(*seeded == earlier_size);
    CHECK(receiver->partial_size(id) == earlier_size);
    // A part staged already (this one) is never begun again over itself.
    auto again = receiver->seed_part(id, earlier_id);
    REQUIRE(again.has_value());
    CHECK(*again == 0);
    receiver->expect_blob(id, size);
    auto rest = receiver->blob_chunk(id, earlier_size,
                                     std::string_view(appended).substr(earlier.size()), size);
    REQUIRE(rest.has_value());
    CHECK(*rest);
    REQUIRE(receiver->flush().is_ok());
    CHECK(stored_blob(**store, id) == appended);
  }
  // Rewritten at its first byte and longer: the earlier version is no prefix of it.
  std::string rewritten = "X" + earlier.substr(1) + "tail";
  std::string rewritten_id = sha256_hex(rewritten);
  auto rewritten_size = static_cast<int64_t>(rewritten.size());
  SECTION("rewritten: the source starts over from byte 0 and the begun part is dropped") {
    REQUIRE(receiver->seed_part(rewritten_id, earlier_id).has_value());
    receiver->expect_blob(rewritten_id, rewritten_size);
    auto whole = receiver->blob_chunk(rewritten_id, 0, rewritten, rewritten_size);
    REQUIRE(whole.has_value());
    CHECK(*whole);
    REQUIRE(receiver->flush().is_ok());
    CHECK(stored_blob(**store, rewritten_id) == rewritten);
  }
  SECTION("rewritten, yet sent from the offset as if appended to: refused, nothing kept") {
    REQUIRE(receiver->seed_part(rewritten_id, earlier_id).has_value());
    receiver->expect_blob(rewritten_id, rewritten_size);
    auto spliced =
        receiver->blob_chunk(rewritten_id, earlier_size,
                             std::string_view(rewritten).substr(earlier.size()), rewritten_size);
    REQUIRE_FALSE(spliced.has_value());
    CHECK(spliced.status().code() == Code::kDataLoss);
    CHECK_FALSE((*store)->has_blob(rewritten_id));
    CHECK(receiver->partial_size(rewritten_id) == 0);
  }
}
