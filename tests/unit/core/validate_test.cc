// Tests for src/core/validate.cc: names, ids and paths that later become mount points and keys.
#include "core/validate.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using rosetctl::Code;

TEST_CASE("names accept the safe alphabet up to 128 bytes", "[validate]") {
  CHECK(rosetctl::validate_name("demo", "name").is_ok());
  CHECK(rosetctl::validate_name("pvc-0b6e1c1e-6b4a-4c1e-9e4c-1b2a3c4d5e6f", "name").is_ok());
  CHECK(rosetctl::validate_name("a.b_c-d", "name").is_ok());
  CHECK(rosetctl::validate_name(std::string(128, 'a'), "name").is_ok());
}

TEST_CASE("names reject what could escape a directory or confuse a shell", "[validate]") {
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "../x", "a/b", "-rf", ".hidden", "a b", "a\nb",
                                std::string("a\0b", 3), "caf\xc3\xa9", std::string(129, 'a')}) {
    auto status = rosetctl::validate_name(bad, "name");
    INFO("value: " << bad);
    CHECK(status.code() == Code::kInvalidArgument);
    CHECK(status.message().find("name") != std::string::npos);
  }
}

TEST_CASE("error messages show hostile values escaped and bounded", "[validate]") {
  auto status = rosetctl::validate_name("a\nb\x1b[31m", "name");
  CHECK(status.message().find('\n') == std::string::npos);
  CHECK(status.message().find('\x1b') == std::string::npos);
  CHECK(status.message().find("\\x0a") != std::string::npos);
  auto long_status = rosetctl::validate_name(std::string(5000, 'a'), "name");
  CHECK(long_status.message().size() < 200);
}

TEST_CASE("escape_text keeps text on one line and its quotes closed", "[validate]") {
  using rosetctl::escape_text;
  CHECK(escape_text("plain text, 1-2_3.") == "plain text, 1-2_3.");
  CHECK(escape_text("a\nFORGED") == R"(a\x0aFORGED)");
  CHECK(escape_text("\r\t\x1b[31m\x7f") == R"(\x0d\x09\x1b[31m\x7f)");
  CHECK(escape_text(R"(say "hi" \ bye)") == R"(say \"hi\" \\ bye)");
  CHECK(escape_text("caf\xc3\xa9") == R"(caf\xc3\xa9)");
  CHECK(escape_text(std::string("a\0b", 3)) == R"(a\x00b)");
  // Escaped text escaped again stays readable: only its backslashes and quotes double.
  CHECK(escape_text(escape_text("x\ny")) == R"(x\\x0ay)");
}

TEST_CASE("display_quoted quotes escaped text, bounded", "[validate]") {
  using rosetctl::display_quoted;
  CHECK(display_quoted("key\nFORGED") == R"("key\x0aFORGED")");
  CHECK(display_quoted(R"(a"b)") == R"("a\"b")");
  CHECK(display_quoted(std::string(100, 'a')) == "\"" + std::string(64, 'a') + "...\"");
  CHECK(display_quoted(std::string(100, 'a'), 200) == "\"" + std::string(100, 'a') + "\"");
}

TEST_CASE("node ids may be longer than names", "[validate]") {
  CHECK(rosetctl::validate_node_id(std::string(192, 'n'), "node_id").is_ok());
  CHECK(rosetctl::validate_node_id(std::string(193, 'n'), "node_id").code() ==
        Code::kInvalidArgument);
}

TEST_CASE("absolute paths are normalised and .. is refused", "[validate]") {
  CHECK(*rosetctl::normalize_absolute_path("/mnt//demo/", "target") == "/mnt/demo");
  CHECK(*rosetctl::normalize_absolute_path("/", "target") == "/");
  CHECK(rosetctl::normalize_absolute_path("mnt/demo", "target").status().code() ==
        Code::kInvalidArgument);
  CHECK(rosetctl::normalize_absolute_path("/mnt/../etc", "target").status().code() ==
        Code::kInvalidArgument);
  CHECK(rosetctl::normalize_absolute_path("/mnt/./x", "target").status().code() ==
        Code::kInvalidArgument);
  CHECK(rosetctl::normalize_absolute_path("", "target").status().message() == "target is required");
}

TEST_CASE("a path component longer than NAME_MAX is refused naming its length", "[validate]") {
  std::string long_part(256, 'c');
  auto refused = rosetctl::normalize_absolute_path("/mnt/" + long_part + "/x", "target_path");
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == Code::kInvalidArgument);
  CHECK(refused.status().message().find("target_path") != std::string::npos);
  CHECK(refused.status().message().find("256 bytes") != std::string::npos);
  CHECK(refused.status().message().find("255") != std::string::npos);
  // The message quotes only the start of the path, not all of it.
  CHECK(refused.status().message().size() < 200);
  CHECK(rosetctl::normalize_absolute_path("/mnt/" + std::string(255, 'c'), "target_path"));
}

TEST_CASE("path_is_within compares whole components", "[validate]") {
  CHECK(rosetctl::path_is_within("/var/lib/rosetctl", "/var/lib/rosetctl"));
  CHECK(rosetctl::path_is_within("/var/lib/rosetctl/mnt/x", "/var/lib/rosetctl"));
  CHECK_FALSE(rosetctl::path_is_within("/var/lib/rosetctl2", "/var/lib/rosetctl"));
  CHECK_FALSE(rosetctl::path_is_within("/var", "/var/lib"));
  CHECK(rosetctl::path_is_within("/anything", "/"));
}
