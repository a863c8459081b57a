// Tests for src/core/commit_store/open_beneath.cc: nothing outside the tree can be reached.
#include "core/commit_store/open_beneath.h"

#include <fcntl.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "core/unique_fd.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using namespace rosetctl::testing;

TEST_CASE("open_beneath opens inside the tree and refuses ways out", "[commit_store]") {
  ScratchDir scratch;
  make_dir(scratch / "tree");
  make_dir(scratch / "tree/sub");
  write_file(scratch / "tree/sub/file", "inside");
  write_file(scratch / "outside", "secret");
  REQUIRE(::symlink("../../outside", (scratch / "tree/sub/escape").c_str()) == 0);
  REQUIRE(::symlink(".", (scratch / "tree/loop").c_str()) == 0);
  UniqueFd root(::open((scratch / "tree").c_str(), O_RDONLY | O_DIRECTORY));
  REQUIRE(root.valid());

  UniqueFd inside(open_beneath(root.get(), "sub/file", O_RDONLY));
  CHECK(inside.valid());
  UniqueFd escape(open_beneath(root.get(), "sub/escape", O_RDONLY));
  CHECK_FALSE(escape.valid());
  CHECK(errno == ELOOP);
  UniqueFd through(open_beneath(root.get(), "loop/sub/file", O_RDONLY));
  CHECK_FALSE(through.valid());
  UniqueFd dotdot(open_beneath(root.get(), "../outside", O_RDONLY));
  CHECK_FALSE(dotdot.valid());
  CHECK(errno == EXDEV);
  UniqueFd created(open_beneath(root.get(), "sub/new", O_WRONLY | O_CREAT | O_EXCL, 0600));
  CHECK(created.valid());
  UniqueFd again(open_beneath(root.get(), "sub/new", O_WRONLY | O_CREAT | O_EXCL, 0600));
  CHECK_FALSE(again.valid());
  CHECK(errno == EEXIST);
}
