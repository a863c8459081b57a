// Tests for src/core/commit_store/received_text.cc: a text received in order, within its size
// and bound, into a file without a name, and handed back only when it hashes to its name.
#include "core/commit_store/received_text.h"

#include <dirent.h>
#include <fcntl.h>

#include <catch2/catch.hpp>

#include "unit/scratch_dir.h"

using namespace rosetctl;
using namespace rosetctl::testing;

namespace {

int entries(const std::string& dir) {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir))
    ++count;
  return count;
}

}  // namespace

TEST_CASE("a received text comes back whole when it hashes to its id", "[commit_store]") {
  ScratchDir scratch;
  UniqueFd dir(::open(scratch.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir.valid());
  auto text = ReceivedText::open(dir.get(), "tree t from node \"a\"", 100);
  REQUIRE(text.has_value());
  CHECK(entries(scratch.path) == 0);  // its file has no name
  REQUIRE(text->append(0, "hello ", 11).is_ok());
  REQUIRE(text->append(6, "world", 11).is_ok());
  auto whole = text->finish(sha256_hex("hello world"));
  REQUIRE(whole.has_value());
  CHECK(*whole == "hello world");
}

TEST_CASE("a received text is refused past its size, its bound, or out of order",
          "[commit_store]") {
  ScratchDir scratch;
  UniqueFd dir(::open(scratch.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir.valid());
  auto open = [&] {
    auto text = ReceivedText::open(dir.get(), "tree t from node \"evil\"", 100);
    REQUIRE(text.has_value());
    return std::move(*text);
  };
  {
    ReceivedText text = open();
    Status over = text.append(0, "x", 101);
    CHECK(over.code() == Code::kDataLoss);
    CHECK_THAT(over.message(), Catch::Contains("tree t from node \"evil\" is said to hold 101") &&
                                   Catch::Contains("1 to 100 bytes"));
  }
  {
    ReceivedText text = open();
    CHECK(text.append(0, "", 0).code() == Code::kDataLoss);
  }
  {
    ReceivedText text = open();
    REQUIRE(text.append(0, "abc", 10).is_ok());
    CHECK(text.append(0, "abc", 10).code() == Code::kDataLoss);  // not where byte 3 was due
    CHECK(text.append(3, "abc", 20).code() == Code::kDataLoss);  // its size changed
    CHECK(text.append(3, std::string(8, 'z'), 10).code() == Code::kDataLoss);  // past its size
  }
  {
    ReceivedText text = open();
    REQUIRE(text.append(0, "abc", 3).is_ok());
    auto corrupt = text.finish(sha256_hex("abd"));
    REQUIRE_FALSE(corrupt.has_value());
    CHECK(corrupt.status().code() == Code::kDataLoss);
    CHECK_THAT(corrupt.status().message(), Catch::Contains("is corrupt"));
  }
  {
    ReceivedText text = open();
    REQUIRE(text.append(0, "ab", 3).is_ok());
    CHECK(text.finish(sha256_hex("abc")).status().code() == Code::kUnavailable);
  }
  CHECK(entries(scratch.path) == 0);  // nothing was left behind
}
