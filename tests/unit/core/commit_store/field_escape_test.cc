// Tests for src/core/commit_store/field_escape.cc.
#include "core/commit_store/field_escape.h"

#include <catch2/catch.hpp>

using rosetctl::escape_field;
using rosetctl::unescape_field;

TEST_CASE("escaped fields are single tokens and round-trip every byte", "[commit_store]") {
  std::string all_bytes;
  for (int c = 0; c < 256; ++c)
    all_bytes += static_cast<char>(c);
  std::string encoded = escape_field(all_bytes);
  CHECK(encoded.find(' ') == std::string::npos);
  CHECK(encoded.find('\n') == std::string::npos);
  CHECK(encoded.find('=') == std::string::npos);
  CHECK(unescape_field(encoded) == all_bytes);
  CHECK(escape_field("a b\nc=%") == "a%20b%0Ac%3D%25");
  CHECK(escape_field("plain/path-1.txt") == "plain/path-1.txt");
}

TEST_CASE("malformed escapes are refused", "[commit_store]") {
  CHECK_FALSE(unescape_field("%").has_value());
  CHECK_FALSE(unescape_field("%4").has_value());
  CHECK_FALSE(unescape_field("%G1").has_value());
  CHECK(unescape_field("%41%62") == std::string("Ab"));
}
