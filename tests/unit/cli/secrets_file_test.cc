// Tests for src/cli/secrets_file.cc (and core/private_file.cc beneath it): what a CLI run accepts
// as CSI secrets, and that no error message quotes a secret.
#include "cli/secrets_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "unit/scratch_dir.h"

using rosetctl::Code;
using rosetctl::cli::read_secrets_file;
using rosetctl::testing::ScratchDir;
using rosetctl::testing::write_file;

namespace {

std::string private_file(const ScratchDir& dir, const std::string& text, mode_t mode = 0600) {
  std::string path = dir / "secrets.json";
  write_file(path, text);
  REQUIRE(::chmod(path.c_str(), mode) == 0);
  return path;
}

}  // namespace

TEST_CASE("a private JSON object of strings is read as secrets") {
  ScratchDir dir;
  auto secrets = read_secrets_file(private_file(dir, R"({"api-key": "rsk_1", "api-url": "x"})"));
  REQUIRE(secrets);
  CHECK(secrets->size() == 2);
  CHECK(secrets->at("api-key") == "rsk_1");
}

TEST_CASE("a secrets file others can read is refused, naming the fix") {
  ScratchDir dir;
  auto secrets = read_secrets_file(private_file(dir, R"({"api-key": "rsk_2"})", 0640));
  REQUIRE_FALSE(secrets);
  CHECK(secrets.status().code() == Code::kPermissionDenied);
  CHECK_THAT(secrets.status().message(), Catch::Contains("chmod 600"));
}

TEST_CASE("malformed secrets are refused without quoting them") {
  ScratchDir dir;
  for (const char* text : {R"({"api-key": "rsk_3_secret")", R"(["rsk_3_secret"])",
                           R"({"api-key": ["rsk_3_secret"]})", R"({"": "rsk_3_secret"})"}) {
    auto secrets = read_secrets_file(private_file(dir, text));
    REQUIRE_FALSE(secrets);
    CHECK(secrets.status().code() == Code::kInvalidArgument);
    CHECK_THAT(secrets.status().message(), !Catch::Contains("rsk_3_secret"));
  }
}

TEST_CASE("a missing file, a directory and a symlink are named as such") {
  ScratchDir dir;
  auto missing = read_secrets_file(dir / "nope.json");
  REQUIRE_FALSE(missing);
  CHECK(missing.status().code() == Code::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("nope.json"));

  auto directory = read_secrets_file(dir.path);
  REQUIRE_FALSE(directory);
  CHECK_THAT(directory.status().message(), Catch::Contains("not a regular file"));

  // A link could point the mode check elsewhere: it is not followed.
  std::string real = private_file(dir, R"({"api-key": "rsk_4"})");
  REQUIRE(::symlink(real.c_str(), (dir / "link.json").c_str()) == 0);
  CHECK_FALSE(read_secrets_file(dir / "link.json"));
}

TEST_CASE("a huge secrets file is refused") {
  ScratchDir dir;
  auto secrets = read_secrets_file(private_file(dir, std::string(100 * 1024, ' ')));
  REQUIRE_FALSE(secrets);
  CHECK_THAT(secrets.status().message(), Catch::Contains("larger than"));
}
