// Tests for src/core/commit_store/file_content.cc: hashing and copying keep holes.
#include "core/commit_store/file_content.h"

#include <fcntl.h>

#include <catch2/catch.hpp>

#include "core/commit_store/sha256.h"
#include "core/unique_fd.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using rosetctl::testing::read_file;
using rosetctl::testing::ScratchDir;

namespace {

constexpr int64_t kSparseSize = 64 << 20;

// 64 MiB with 4 KiB of data at 1 MiB and at the very end: almost all hole.
std::string make_sparse(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644));
  REQUIRE(fd.valid());
  std::string data(4096, 'x');
  REQUIRE(::pwrite(fd.get(), data.data(), data.size(), 1 << 20) == 4096);
  REQUIRE(::pwrite(fd.get(), data.data(), data.size(), kSparseSize - 4096) == 4096);
  std::string expected(kSparseSize, '\0');
  expected.replace(1 << 20, 4096, data);
  expected.replace(kSparseSize - 4096, 4096, data);
  return expected;
}

int64_t allocated_bytes(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return static_cast<int64_t>(st.st_blocks) * 512;
}

}  // namespace

TEST_CASE("hash_content hashes holes as zeros and writes a sparse copy", "[commit_store]") {
  ScratchDir dir;
  std::string expected = make_sparse(dir / "sparse");
  UniqueFd src(::open((dir / "sparse").c_str(), O_RDONLY));
  UniqueFd dst(::open((dir / "copy").c_str(), O_RDWR | O_CREAT, 0644));
  ContentBuffer buffer;
  auto hashed = hash_content(src.get(), kSparseSize, dst.get(), buffer, "sparse");
  REQUIRE(hashed.has_value());
  CHECK_FALSE(hashed->short_read);
  CHECK(hashed->sha256 == sha256_hex(expected));
  CHECK(read_file(dir / "copy") == expected);
  CHECK(allocated_bytes(dir / "copy") < 1 << 20);
}

TEST_CASE("hash_content notices a file that is shorter than expected", "[commit_store]") {
  ScratchDir dir;
  rosetctl::testing::write_file(dir / "short", "abc");
  UniqueFd src(::open((dir / "short").c_str(), O_RDONLY));
  ContentBuffer buffer;
  auto hashed = hash_content(src.get(), 10, -1, buffer, "short");
  REQUIRE(hashed.has_value());
  CHECK(hashed->short_read);
}

TEST_CASE("copy_content copies data segments and keeps holes", "[commit_store]") {
  ScratchDir dir;
  std::string expected = make_sparse(dir / "sparse");
  UniqueFd src(::open((dir / "sparse").c_str(), O_RDONLY));
  UniqueFd dst(::open((dir / "copy").c_str(), O_RDWR | O_CREAT, 0644));
  REQUIRE(copy_content(src.get(), dst.get(), kSparseSize, "sparse").is_ok());
  CHECK(read_file(dir / "copy") == expected);
  CHECK(allocated_bytes(dir / "copy") < 1 << 20);
}

TEST_CASE("clone_content reports an unsupported filesystem as false, not an error",
          "[commit_store]") {
  ScratchDir dir;
  rosetctl::testing::write_file(dir / "a", "data");
  UniqueFd src(::open((dir / "a").c_str(), O_RDONLY));
  UniqueFd dst(::open((dir / "b").c_str(), O_RDWR | O_CREAT, 0644));
  auto cloned = clone_content(src.get(), dst.get(), "a");
  REQUIRE(cloned.has_value());  // true on xfs/btrfs, false on ext4/tmpfs
  if (*cloned) CHECK(read_file(dir / "b") == "data");
}
