// Tests for src/core/commit_store/stat_cache.cc.
#include "core/commit_store/stat_cache.h"

#include <catch2/catch.hpp>

#include "core/commit_store/sha256.h"
#include "unit/core/commit_store/scratch_dir.h"

using namespace rosetctl;
using rosetctl::testing::ScratchDir;

TEST_CASE("a stat cache round-trips, odd names included", "[commit_store]") {
  ScratchDir dir;
  StatCache cache;
  CachedFile file{{42, 7, 1000, 2000}, sha256_hex("x")};
  cache.add("dir/name with space\nand newline", file);
  REQUIRE(cache.save(dir / "cache").is_ok());
  StatCache loaded = StatCache::load(dir / "cache");
  REQUIRE(loaded.size() == 1);
  const CachedFile* found = loaded.find("dir/name with space\nand newline");
  REQUIRE(found != nullptr);
  CHECK(found->version == file.version);
  CHECK(found->content == file.content);
}

TEST_CASE("a missing or damaged stat cache loads as empty", "[commit_store]") {
  ScratchDir dir;
  CHECK(StatCache::load(dir / "missing").size() == 0);
  rosetctl::testing::write_file(dir / "bad", "rosetctl-stat-cache 1\n1 2 3 nothex x\n");
  CHECK(StatCache::load(dir / "bad").size() == 0);
}
