// Tests for src/core/directory_listing.cc: names without "." and "..", errors named, and the
// end of a listing told apart from a failure whatever errno held before.
#include "core/directory_listing.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <set>

#include "unit/scratch_dir.h"

namespace rosetctl {
namespace {

using testing::ScratchDir;
using testing::write_file;

TEST_CASE("directory listing: every name but . and .., past one getdents buffer") {
  ScratchDir scratch;
  std::set<std::string> made;
  for (int i = 0; i < 1500; ++i) {  // ~50 KiB of entries: several reads of the stream
    std::string name = fmt::format("entry-{:04}-with-a-longer-name", i);
    write_file(scratch / name, "");
    made.insert(name);
  }
  testing::make_dir(scratch / "sub");
  made.insert("sub");

  auto names = list_directory(scratch.path);
  REQUIRE(names);
  CHECK(names->size() == made.size());
  CHECK(std::set<std::string>(names->begin(), names->end()) == made);
}

TEST_CASE("directory listing: an empty directory lists nothing") {
  ScratchDir scratch;
  auto names = list_directory(scratch.path);
  REQUIRE(names);
  CHECK(names->empty());
}

TEST_CASE("directory listing: a missing directory is NOT_FOUND naming it") {
  ScratchDir scratch;
  auto names = list_directory(scratch / "missing");
  REQUIRE_FALSE(names);
  CHECK(names.status().code() == Code::kNotFound);
  CHECK_THAT(names.status().message(), Catch::Contains(scratch / "missing"));

  write_file(scratch / "file", "x");
  auto not_dir = list_directory(scratch / "file");
  REQUIRE_FALSE(not_dir);
  CHECK_THAT(not_dir.status().message(), Catch::Contains(scratch / "file"));
}

// The wrong way clears errno once before the loop: anything in the loop that leaves errno set
// (a failed syscall the caller tolerates) then reads as a failure of the last readdir.
TEST_CASE("directory listing: errno left set between names is not taken for a read error") {
  ScratchDir scratch;
  write_file(scratch / "a", "");
  write_file(scratch / "b", "");
  auto listing = DirectoryListing::open(scratch.path);
  REQUIRE(listing);
  int seen = 0;
  for (;;) {
    auto name = listing->next();
    REQUIRE(name);
    if (!name->has_value()) break;
    ++seen;
    errno = EIO;  // what a tolerated failure in the caller's loop body leaves behind
  }
  CHECK(seen == 2);
}

TEST_CASE("directory listing: open_at lists an O_PATH descriptor and leaves it open") {
  ScratchDir scratch;
  write_file(scratch / "one", "");
  int fd = ::open(scratch.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  for (int round = 0; round < 2; ++round) {  // a second listing starts again at the first name
    auto names = list_directory_at(fd, scratch.path);
    REQUIRE(names);
    CHECK(*names == std::vector<std::string>{"one"});
  }
  CHECK(::fcntl(fd, F_GETFD) >= 0);
  ::close(fd);

  auto bad = list_directory_at(-1, "nowhere");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.status().message(), Catch::Contains("nowhere"));
}

}  // namespace
}  // namespace rosetctl
