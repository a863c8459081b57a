// Tests for src/core/commit_store/tree.cc: the canonical text form and its parser.
#include "core/commit_store/tree.h"

#include <catch2/catch.hpp>

#include "core/commit_store/sha256.h"

using namespace rosetctl;

namespace {

Tree sample_tree() {
  Tree tree;
  tree.entries.push_back({"", EntryType::kDirectory, 0777, 0, 0, 1'700'000'000'123'456'789});
  TreeEntry file{"a dir/new\nline file", EntryType::kRegular, 04755, 1000, 100, -5};
  file.size = 3;
  file.content = sha256_hex("abc");
  file.xattrs = {{"user.note", "x y=z"}, {"user.empty", ""}};
  TreeEntry dir{"a dir", EntryType::kDirectory, 01777, 0, 0, 7};
  TreeEntry link{"link", EntryType::kSymlink, 0777, 0, 0, 8};
  link.target = "../outside target";
  TreeEntry hard{"link2", EntryType::kHardlink, 0644, 0, 0, 9};
  hard.target = "a dir/new\nline file";
  TreeEntry device{"null", EntryType::kCharDevice, 0666, 0, 0, 10};
  device.rdev = 259;
  tree.entries.push_back(dir);
  tree.entries.push_back(file);
  tree.entries.push_back(link);
  tree.entries.push_back(hard);
  tree.entries.push_back(device);
  tree.entries.push_back({"pipe", EntryType::kFifo, 0600, 0, 0, 11});
  sort_tree(tree);
  return tree;
}

}  // namespace

TEST_CASE("a tree round-trips through its text form", "[commit_store]") {
  Tree tree = sample_tree();
  std::string text = serialize_tree(tree);
  auto parsed = parse_tree(text);
  REQUIRE(parsed.has_value());
  CHECK(parsed->entries == tree.entries);
  CHECK(serialize_tree(*parsed) == text);
  CHECK(text.find("a%20dir/new%0Aline%20file") != std::string::npos);
}

TEST_CASE("tree totals count regular files once", "[commit_store]") {
  TreeTotals totals = tree_totals(sample_tree());
  CHECK(totals.files == 1);
  CHECK(totals.bytes == 3);
}

// Found by fuzz_commit_store (corpus/commit_store/regression-tree-size-overflow): every reader
// adds a tree's sizes up (tree_totals, verification, restore progress), which overflowed.
TEST_CASE("a tree whose files add up to more than 2^63-1 bytes is DATA_LOSS", "[commit_store]") {
  std::string blob = sha256_hex("x");
  std::string one = fmt::format("f a 600 0 0 0 9223372036854775807 {}\n", blob);
  auto single = parse_tree("rosetctl-tree 1\nd . 700 0 0 0\n" + one);
  REQUIRE(single.has_value());  // one file of the largest size is still a tree
  CHECK(tree_totals(*single).bytes == 9223372036854775807);
  auto parsed =
      parse_tree(fmt::format("rosetctl-tree 1\nd . 700 0 0 0\n{}f b 600 0 0 0 1 {}\n", one, blob));
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.status().code() == Code::kDataLoss);
  CHECK_THAT(parsed.status().message(), Catch::Contains("line 4"));
}

TEST_CASE("malformed trees are DATA_LOSS", "[commit_store]") {
  std::string good = serialize_tree(sample_tree());
  for (const std::string& bad : {
           std::string("rosetctl-tree 2\n"),
           std::string("rosetctl-tree 1\nf x 644 0 0 1 3 nothex\n"),
           std::string("rosetctl-tree 1\nd . 755 0 0 1\nd ../up 755 0 0 1\n"),
           std::string("rosetctl-tree 1\nd . 755 0 0 1\nd a//b 755 0 0 1\n"),
           std::string("rosetctl-tree 1\nd b 755 0 0 1\nd a 755 0 0 1\n"),
           std::string("rosetctl-tree 1\nq . 755 0 0 1\n"),
           good.substr(0, good.size() - 1),
       }) {
    auto parsed = parse_tree(bad);
    CHECK_FALSE(parsed.has_value());
    if (!parsed) CHECK(parsed.status().code() == Code::kDataLoss);
  }
}

TEST_CASE("a tree from another host loses setuid bits, devices and privileged xattrs",
          "[commit_store]") {
  Tree tree = sample_tree();
  TreeEntry capable{"ping", EntryType::kRegular, 02755, 0, 0, 12};
  capable.xattrs = {
      {"security.capability", "\x01\x02"}, {"trusted.overlay", "y"}, {"user.ok", "z"}};
  TreeEntry block{"disk", EntryType::kBlockDevice, 0660, 0, 6, 13};
  block.rdev = 2048;
  TreeEntry link_to_block{"disk2", EntryType::kHardlink, 0660, 0, 6, 14};
  link_to_block.target = "disk";
  tree.entries.push_back(capable);
  tree.entries.push_back(block);
  tree.entries.push_back(link_to_block);
  sort_tree(tree);

  CHECK(strip_privileged_metadata(tree) == 5);  // file (suid), ping, null, disk, disk2
  for (const TreeEntry& entry : tree.entries) {
    CHECK(entry.type != EntryType::kCharDevice);
    CHECK(entry.type != EntryType::kBlockDevice);
    CHECK(entry.path != "disk2");
    if (entry.type != EntryType::kDirectory) CHECK((entry.mode & 06000) == 0);
    for (const Xattr& xattr : entry.xattrs)
      CHECK(xattr.name.starts_with("user."));
  }
  // What is not privileged stays: the sticky directory, the fifo, the user xattr, the hard link.
  auto find = [&](std::string_view path) {
    return std::find_if(tree.entries.begin(), tree.entries.end(),
                        [&](const TreeEntry& e) { return e.path == path; });
  };
  CHECK(find("a dir")->mode == 01777);
  CHECK(find("pipe") != tree.entries.end());
  CHECK(find("link2") != tree.entries.end());
  CHECK(find("ping")->xattrs == std::vector<Xattr>{{"user.ok", "z"}});
  CHECK(find("ping")->mode == 0755);
  CHECK(strip_privileged_metadata(tree) == 0);  // nothing left to strip
}
