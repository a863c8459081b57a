// Tests for src/core/commit_store/tree_walk.cc: xattrs known from an earlier read are taken as
// given for files still at the same version, and read for every other entry.
#include "core/commit_store/tree_walk.h"

#include <fcntl.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>

#include "core/unique_fd.h"
#include "unit/core/commit_store/sample_volume.h"

using namespace rosetctl;
using namespace rosetctl::testing;

TEST_CASE("the walk takes known xattrs only for files at the version they were known for",
          "[commit_store]") {
  ScratchDir scratch;
  std::string root = scratch / "volume";
  make_dir(root);
  write_file(root + "/known", "k");
  write_file(root + "/moved", "m");
  write_file(root + "/unknown", "u");
  for (const char* name : {"known", "moved", "unknown"}) {
    REQUIRE(::setxattr((root + "/" + name).c_str(), "user.on.disk", "1", 1, 0) == 0);
  }
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd.valid());
  auto first = walk_tree(fd.get(), root);
  REQUIRE(first.has_value());
  std::map<std::string, FileVersion> versions;
  for (const WalkedEntry& walked : *first)
    versions[walked.entry.path] = walked.version;
  versions["moved"].ctime_ns -= 1;  // as if the file changed since

  const std::vector<Xattr> remembered{{"user.remembered", "yes"}};
  std::vector<std::string> asked;
  auto walked = walk_tree(fd.get(), root, [&](const std::string& path, const FileVersion& version) {
    asked.push_back(path);
    bool same = path != "unknown" && versions[path] == version;
    return same ? &remembered : nullptr;
  });
  REQUIRE(walked.has_value());
  std::map<std::string, std::vector<Xattr>> xattrs;
  for (const WalkedEntry& entry : *walked)
    xattrs[entry.entry.path] = entry.entry.xattrs;
  CHECK(xattrs["known"] == remembered);
  CHECK(xattrs["moved"] == std::vector<Xattr>{{"user.on.disk", "1"}});
  CHECK(xattrs["unknown"] == std::vector<Xattr>{{"user.on.disk", "1"}});
  std::sort(asked.begin(), asked.end());
  CHECK(asked == std::vector<std::string>{"known", "moved", "unknown"});  // never directories
}
