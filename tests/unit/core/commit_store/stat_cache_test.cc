// Tests for src/core/commit_store/stat_cache.cc.
#include "core/commit_store/stat_cache.h"

#include <catch2/catch.hpp>

#include "core/commit_store/sha256.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using rosetctl::testing::ScratchDir;

TEST_CASE("a stat cache round-trips, odd names and xattrs included", "[commit_store]") {
  ScratchDir dir;
  StatCache cache;
  cache.set_anchor(sha256_hex("commit"));
  std::vector<Xattr> xattrs{{"user.a=b", "value with = and space\n"}, {"user.empty", ""}};
  CachedFile file{{42, 7, 1000, 2000}, sha256_hex("x"), xattrs};
  cache.add("dir/name with space\nand newline", file);
  cache.add("plain", CachedFile{{43, 0, 1, 2}, sha256_hex(""), {}});
  REQUIRE(cache.save(dir / "cache").is_ok());
  StatCache loaded = StatCache::load(dir / "cache");
  CHECK(loaded.anchor() == sha256_hex("commit"));
  REQUIRE(loaded.size() == 2);
  const CachedFile* found = loaded.find("dir/name with space\nand newline");
  REQUIRE(found != nullptr);
  CHECK(found->version == file.version);
  CHECK(found->content == file.content);
  CHECK(found->xattrs == xattrs);
  REQUIRE(loaded.find("plain") != nullptr);
  CHECK(loaded.find("plain")->xattrs.empty());
}

TEST_CASE("a stat cache without an anchor round-trips with none", "[commit_store]") {
  ScratchDir dir;
  StatCache cache;
  cache.add("f", CachedFile{{1, 2, 3, 4}, sha256_hex("f"), {}});
  REQUIRE(cache.save(dir / "cache").is_ok());
  StatCache loaded = StatCache::load(dir / "cache");
  CHECK(loaded.anchor().empty());
  CHECK(loaded.size() == 1);
}

TEST_CASE("a missing or damaged stat cache loads as empty", "[commit_store]") {
  ScratchDir dir;
  CHECK(StatCache::load(dir / "missing").size() == 0);
  std::string digest = sha256_hex("x");
  rosetctl::testing::write_file(dir / "bad", "rosetctl-stat-cache 2 -\n1 2 3 nothex x\n");
  CHECK(StatCache::load(dir / "bad").size() == 0);
  rosetctl::testing::write_file(dir / "bad-xattr",
                                "rosetctl-stat-cache 2 -\n1 2 3 4 " + digest + " x noequals\n");
  CHECK(StatCache::load(dir / "bad-xattr").size() == 0);
  rosetctl::testing::write_file(dir / "bad-anchor",
                                "rosetctl-stat-cache 2 nothex\n1 2 3 4 " + digest + " x\n");
  CHECK(StatCache::load(dir / "bad-anchor").size() == 0);
  // The format before xattrs were cached: read as empty, so every file is read once more.
  rosetctl::testing::write_file(dir / "v1", "rosetctl-stat-cache 1\n1 2 3 4 " + digest + " x\n");
  CHECK(StatCache::load(dir / "v1").size() == 0);
}
