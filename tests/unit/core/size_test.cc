// Tests for src/core/size.cc: parsing and printing sizes exactly.
#include "core/size.h"

#include <catch2/catch.hpp>

using rosetctl::Code;

TEST_CASE("sizes in the forms people write", "[size]") {
  CHECK(*rosetctl::parse_size("4096") == 4096);
  CHECK(*rosetctl::parse_size("64Mi") == 64LL << 20);
  CHECK(*rosetctl::parse_size("10Gi") == 10LL << 30);
  CHECK(*rosetctl::parse_size("1.5Ti") == 3LL << 39);
  CHECK(*rosetctl::parse_size("500M") == 500'000'000);
  CHECK(*rosetctl::parse_size("1k") == 1000);
  CHECK(*rosetctl::parse_size("1K") == 1000);
  CHECK(*rosetctl::parse_size("2Ki") == 2048);
  CHECK(*rosetctl::parse_size("0") == 0);
}

TEST_CASE("fractions round up to whole bytes", "[size]") {
  CHECK(*rosetctl::parse_size("0.5Ki") == 512);
  CHECK(*rosetctl::parse_size("0.1Ki") == 103);  // 102.4 rounds up
}

TEST_CASE("bad sizes are errors naming the text", "[size]") {
  for (const char* bad : {"", "Gi", "12XB", "1.2.3Gi", "abc", "1 Gi", "0x10", "1.5"}) {
    auto parsed = rosetctl::parse_size(bad);
    INFO("text: " << bad);
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.status().code() == Code::kInvalidArgument);
  }
  CHECK(rosetctl::parse_size("-1Gi").status().code() == Code::kOutOfRange);
  CHECK(rosetctl::parse_size("9Ei").status().code() == Code::kOutOfRange);
  CHECK(rosetctl::parse_size("99999999999999999999").status().code() == Code::kOutOfRange);
  CHECK(rosetctl::parse_size("12XB").status().message().find("12XB") != std::string::npos);
}

TEST_CASE("the largest size that fits is accepted", "[size]") {
  CHECK(*rosetctl::parse_size("9223372036854775807") == INT64_MAX);
  CHECK(*rosetctl::parse_size("7Ei") == 7LL << 60);
}

TEST_CASE("sizes print in their shortest exact form, binary or decimal", "[size]") {
  CHECK(rosetctl::format_size(64LL << 20) == "64Mi");
  CHECK(rosetctl::format_size(3LL << 39) == "1.5Ti");
  CHECK(rosetctl::format_size(1536) == "1.5Ki");
  CHECK(rosetctl::format_size(1000) == "1k");
  CHECK(rosetctl::format_size(1023) == "1023");
  CHECK(rosetctl::format_size(123456789) == "123456789");
  // Decimal when shorter: --size 500M was shown as 488281.25Ki.
  CHECK(rosetctl::format_size(500'000'000) == "500M");
  CHECK(rosetctl::format_size(1'500'000'000'000) == "1.5T");
  CHECK(rosetctl::format_size(1280LL << 20) == "1.25Gi");
  CHECK(rosetctl::format_size(1LL << 30) == "1Gi");
  CHECK(rosetctl::format_size(0) == "0");
  for (int64_t bytes : {int64_t{1} << 30, int64_t{5} << 40, int64_t{1280} << 20, int64_t{500000000},
                        int64_t{1000}, int64_t{12345678}}) {
    CHECK(*rosetctl::parse_size(rosetctl::format_size(bytes)) == bytes);
  }
}
