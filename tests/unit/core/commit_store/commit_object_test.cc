// Tests for src/core/commit_store/commit_object.cc.
#include "core/commit_store/commit_object.h"

#include <catch2/catch.hpp>

#include "core/commit_store/sha256.h"

using namespace rosetctl;

TEST_CASE("a commit round-trips with and without a parent", "[commit_store]") {
  CommitObject commit{sha256_hex("tree"),  "", "local-00ff", "demo",
                      1700000000000000001, 3,  4096,         "epoch 3\nloss = 0.1"};
  auto parsed = parse_commit(serialize_commit(commit));
  REQUIRE(parsed.has_value());
  CHECK(*parsed == commit);
  commit.parent = sha256_hex("parent");
  parsed = parse_commit(serialize_commit(commit));
  REQUIRE(parsed.has_value());
  CHECK(*parsed == commit);
}

TEST_CASE("the commit text changes with identity, not only with the tree", "[commit_store]") {
  CommitObject a{sha256_hex("tree"), "", "local-a", "a", 1, 0, 0, ""};
  CommitObject b = a;
  b.volume_id = "local-b";
  CHECK(sha256_hex(serialize_commit(a)) != sha256_hex(serialize_commit(b)));
}

TEST_CASE("malformed commits are DATA_LOSS", "[commit_store]") {
  CommitObject commit{sha256_hex("tree"), "", "v", "n", 1, 0, 0, "m"};
  std::string text = serialize_commit(commit);
  for (const std::string& bad :
       {std::string("rosetctl-commit 1\ntree x\n"), text.substr(0, text.size() - 1),
        text + "extra line\n", std::string("something else")}) {
    auto parsed = parse_commit(bad);
    CHECK_FALSE(parsed.has_value());
    if (!parsed) CHECK(parsed.status().code() == Code::kDataLoss);
  }
}

TEST_CASE("an image commit names its kind; a directory commit's text is unchanged",
          "[commit_store]") {
  CommitObject directory{sha256_hex("tree"), "", "local-a", "a", 1, 1, 4096, "m"};
  CHECK(serialize_commit(directory).find("\nimage ") == std::string::npos);
  CommitObject image = directory;
  image.image = "ext4";
  image.parent = sha256_hex("parent");
  std::string text = serialize_commit(image);
  CHECK(text.find("\nimage ext4\n") != std::string::npos);
  auto parsed = parse_commit(text);
  REQUIRE(parsed.has_value());
  CHECK(*parsed == image);
  CHECK(sha256_hex(text) != sha256_hex(serialize_commit(directory)));
  auto empty_kind =
      parse_commit("rosetctl-commit 1\ntree " + sha256_hex("tree") +
                   "\nimage \nvolume v\nvolume-name n\ntime 1\nfiles 0\nbytes 0\nmessage m\n");
  CHECK_FALSE(empty_kind.has_value());
}
