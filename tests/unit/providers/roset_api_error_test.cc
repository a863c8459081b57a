// Roset API errors → CSI codes and messages (providers/roset/api_error.cc).
#include <catch2/catch.hpp>

#include "providers/roset/api_error.h"

using namespace rosetctl;

TEST_CASE("HTTP statuses map to the CSI codes the issue names", "[roset]") {
  CHECK(status_from_http(400, "", "x").code() == Code::kInvalidArgument);
  CHECK(status_from_http(401, "", "x").code() == Code::kUnauthenticated);
  CHECK(status_from_http(402, "", "x").code() == Code::kResourceExhausted);
  CHECK(status_from_http(403, "", "x").code() == Code::kPermissionDenied);
  CHECK(status_from_http(404, "", "x").code() == Code::kNotFound);
  CHECK(status_from_http(409, "", "x").code() == Code::kAlreadyExists);
  CHECK(status_from_http(429, "", "x").code() == Code::kUnavailable);
  CHECK(status_from_http(500, "", "x").code() == Code::kInternal);
  CHECK(status_from_http(502, "", "x").code() == Code::kUnavailable);
  CHECK(status_from_http(503, "", "x").code() == Code::kUnavailable);
  CHECK(status_from_http(504, "", "x").code() == Code::kUnavailable);
}

TEST_CASE("error messages carry what failed, the server's words and advice", "[roset]") {
  Status status =
      status_from_http(401, R"({"error":"Missing or invalid API key","code":"UNAUTHORIZED"})",
                       "create folder \"/v\"");
  CHECK(status.message().find("create folder \"/v\"") != std::string::npos);
  CHECK(status.message().find("HTTP 401 UNAUTHORIZED: Missing or invalid API key") !=
        std::string::npos);
  CHECK(status.message().find("ROSET_API_KEY") != std::string::npos);
}

TEST_CASE("error bodies are parsed tolerantly", "[roset]") {
  auto conflict = parse_error_body(
      R"({"error":"exists","code":"NAME_CONFLICT","details":{"existingNodeId":"n-1"}})");
  CHECK(conflict.code == "NAME_CONFLICT");
  CHECK(conflict.existing_node_id == "n-1");
  auto nested = parse_error_body(R"({"error":{"message":"slow down","code":"RATE_LIMIT"}})");
  CHECK(nested.message == "slow down");
  CHECK(nested.code == "RATE_LIMIT");
  auto html = parse_error_body("<html>Bad Gateway</html>");
  CHECK(html.message.empty());
  CHECK(status_from_http(502, "<html>Bad Gateway</html>", "x").message().find("HTTP 502") !=
        std::string::npos);
}

TEST_CASE("the server's words are quoted escaped, on one line", "[roset]") {
  Status status = status_from_http(
      400, R"({"error":"bad name\nFORGED line","code":"X\r\nY","requestId":"r\"1"})", "x");
  CHECK(status.message().find('\n') == std::string::npos);
  CHECK(status.message().find('\r') == std::string::npos);
  CHECK(status.message().find(R"(bad name\x0aFORGED line)") != std::string::npos);
  CHECK(status.message().find(R"(X\x0d\x0aY)") != std::string::npos);
  CHECK(status.message().find(R"((request r\"1))") != std::string::npos);
}
