// Tests for src/core/commit_store/tree_diff.cc.
#include "core/commit_store/tree_diff.h"

#include <catch2/catch.hpp>

using namespace rosetctl;

TEST_CASE("diff reports added, removed and changed paths with what changed", "[commit_store]") {
  Tree from, to;
  from.entries = {{"", EntryType::kDirectory, 0755},
                  {"gone", EntryType::kRegular, 0644},
                  {"same", EntryType::kRegular, 0644},
                  {"touched", EntryType::kRegular, 0644}};
  to.entries = {{"", EntryType::kDirectory, 0755},
                {"new", EntryType::kSymlink, 0777},
                {"same", EntryType::kRegular, 0644},
                {"touched", EntryType::kRegular, 0600}};
  to.entries[3].content = std::string(64, 'a');
  to.entries[3].mtime_ns = 5;
  auto changes = diff_trees(from, to);
  REQUIRE(changes.size() == 3);
  CHECK(changes[0].kind == TreeChange::Kind::kRemoved);
  CHECK(changes[0].path == "gone");
  CHECK(changes[1].kind == TreeChange::Kind::kAdded);
  CHECK(changes[1].path == "new");
  CHECK(changes[2].kind == TreeChange::Kind::kChanged);
  CHECK(changes[2].aspects == std::vector<std::string>{"content", "mode", "mtime"});
  CHECK(diff_trees(to, to).empty());
}
