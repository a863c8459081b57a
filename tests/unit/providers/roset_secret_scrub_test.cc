// The API key taken out of text and response bodies (providers/roset/secret_scrub.cc).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "providers/roset/secret_scrub.h"

using namespace rosetctl;

TEST_CASE("a secret is scrubbed from any text", "[roset]") {
  CHECK(scrub_secret("key rsk_1 and rsk_1 again", "rsk_1") ==
        "key [redacted] and [redacted] again");
  CHECK(scrub_secret("bad key Bearer rsk_1", "rsk_1") == "bad key Bearer [redacted]");
  CHECK(scrub_secret("nothing", "") == "nothing");
}

TEST_CASE("a secret that is part of the replacement is scrubbed once, not forever", "[roset]") {
  CHECK(scrub_secret("a key: e", "e") == "a k[redacted]y: [redacted]");
  CHECK(scrub_secret("red red", "red") == "[redacted] [redacted]");
}

TEST_CASE("a JSON body loses the secret in every form its strings decode from", "[roset]") {
  std::string key = "rk_live/abc";
  // "/" written as "\/", and every character of the key as \uXXXX: both decode to the key.
  std::string escaped_slash = R"({"error":"bad key Bearer rk_live\/abc","code":"UNAUTHORIZED"})";
  std::string unicode;
  for (char c : key)
    unicode += fmt::format("\\u{:04x}", c);
  std::string all_escaped = R"({"error":{"message":"Bearer )" + unicode + R"("}})";
  std::string in_a_key = R"({")" + key + R"(":1,"items":["x rk_live/abc"]})";
  for (const std::string& body : {escaped_slash, all_escaped, in_a_key}) {
    std::string scrubbed = scrub_secret_from_body(body, key);
    auto json = nlohmann::json::parse(scrubbed);
    CHECK(json.dump().find(key) == std::string::npos);
    CHECK(scrubbed.find("[redacted]") != std::string::npos);
  }
  CHECK(nlohmann::json::parse(scrub_secret_from_body(escaped_slash, key))["code"] ==
        "UNAUTHORIZED");
}

TEST_CASE("a body without the secret is left as it was", "[roset]") {
  std::string body = R"({ "id": "n-1",  "name": "db" })";
  CHECK(scrub_secret_from_body(body, "rsk_1") == body);
  CHECK(scrub_secret_from_body("<html>rsk_1</html>", "rsk_1") == "<html>[redacted]</html>");
}
