// Tests for src/core/full_filesystem.cc: a full disk names its filesystem, once.
#include "core/full_filesystem.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>

using rosetctl::Code;

TEST_CASE("a full disk names the filesystem holding the state directory", "[full_filesystem]") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto full = rosetctl::errno_status(ENOSPC, "cannot write blob 12ab");
  REQUIRE(full.code() == Code::kResourceExhausted);
  auto named = rosetctl::name_full_filesystem(full, dir);
  CHECK(named.code() == Code::kResourceExhausted);
  CHECK(named.message().find("cannot write blob 12ab") != std::string::npos);
  CHECK(named.message().find("filesystem") != std::string::npos);
  CHECK(named.message().find("(state directory " + dir + ")") != std::string::npos);

  SECTION("naming it again (the CLI's edge after serve's) changes nothing") {
    CHECK(rosetctl::name_full_filesystem(named, dir).message() == named.message());
  }
}

TEST_CASE("other failures are left as they are", "[full_filesystem]") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto quota = rosetctl::Status(Code::kResourceExhausted, "the API's volume quota is used up");
  CHECK(rosetctl::name_full_filesystem(quota, dir).message() == quota.message());
  auto missing = rosetctl::errno_status(ENOENT, "cannot open x");
  CHECK(rosetctl::name_full_filesystem(missing, dir).message() == missing.message());
  CHECK(rosetctl::name_full_filesystem(rosetctl::Status::ok(), dir).is_ok());
}
