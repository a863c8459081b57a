// Tests for src/core/commit_store/sha256.cc against the FIPS 180-2 vectors.
#include "core/commit_store/sha256.h"

#include <catch2/catch.hpp>
#include <string>

using rosetctl::is_digest_hex;
using rosetctl::Sha256;
using rosetctl::sha256_hex;

TEST_CASE("SHA-256 matches the published test vectors", "[commit_store]") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 split;
  split.update("a");
  split.update("bc");
  CHECK(split.finish_hex() == sha256_hex("abc"));
}

TEST_CASE("hashing zeros equals hashing a buffer of zeros", "[commit_store]") {
  for (uint64_t count : {0ull, 1ull, 65536ull, 200000ull}) {
    Sha256 zeros;
    zeros.update_zeros(count);
    CHECK(zeros.finish_hex() == sha256_hex(std::string(count, '\0')));
  }
}

TEST_CASE("digest hex is 64 lowercase hex digits", "[commit_store]") {
  CHECK(is_digest_hex(sha256_hex("x")));
  CHECK_FALSE(is_digest_hex("ABC"));
  CHECK_FALSE(is_digest_hex(std::string(64, 'g')));
  CHECK_FALSE(is_digest_hex(std::string(63, 'a')));
}
