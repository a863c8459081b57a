// Parsing of the Roset API's wrapped and bare response shapes (providers/roset/api_json.cc).
#include <catch2/catch.hpp>

#include "providers/roset/api_json.h"

using namespace rosetctl;
using nlohmann::json;

TEST_CASE("nodes parse bare and wrapped, camelCase and snake_case", "[roset]") {
  auto bare = parse_node(json::parse(R"({"id":"n1","name":"a","type":"folder","parentId":null,
                                         "mountId":"m","deletedAt":null})"),
                         "x");
  REQUIRE(bare);
  CHECK(bare->id == "n1");
  CHECK(bare->type == "folder");
  CHECK(bare->mount_id == "m");
  CHECK_FALSE(bare->deleted);
  auto wrapped = parse_node(json::parse(R"({"node":{"id":"n2","type":"file",
                                          "deleted_at":"2024-01-01T00:00:00Z"}})"),
                            "x");
  REQUIRE(wrapped);
  CHECK(wrapped->id == "n2");
  CHECK(wrapped->deleted);
  auto broken = parse_node(json::parse(R"({"name":"no id"})"), "create folder");
  REQUIRE_FALSE(broken);
  CHECK(broken.status().code() == Code::kInternal);
  CHECK(broken.status().message().find("create folder") != std::string::npos);
}

TEST_CASE("commits parse in both create forms and as polled", "[roset]") {
  auto accepted = parse_commit(
      json::parse(R"({"commit":{"id":"c1"},"_links":{"self":"/v1/commits/c1"}})"), "x");
  REQUIRE(accepted);
  CHECK(accepted->id == "c1");
  CHECK(accepted->status.empty());
  auto older = parse_commit(json::parse(R"({"commit":{"id":"c2","node_id":"n","status":"pending",
                                          "error_message":null}})"),
                            "x");
  REQUIRE(older);
  CHECK(older->node_id == "n");
  CHECK(older->status == "pending");
  auto done = parse_commit(json::parse(R"({"id":"c3","nodeId":"n","status":"failed",
                                         "errorMessage":"boom","createdAt":"2024-05-01T12:00:00.5Z",
                                         "stats":{"fileCount":3,"totalSize":42}})"),
                           "x");
  REQUIRE(done);
  CHECK(done->error_message == "boom");
  CHECK(done->file_count == 3);
  CHECK(done->total_size == 42);
  CHECK(parse_timestamp_ns(done->created_at) == 1714564800'500000000LL);
}

TEST_CASE("resolve results parse in all three published shapes", "[roset]") {
  auto map = parse_resolved(json::parse(R"({"/v/a":{"id":"n1","type":"folder"},"/v/b":null})"),
                            "/v/a", "x");
  REQUIRE(map);
  REQUIRE(map->has_value());
  CHECK((*map)->id == "n1");
  auto missing = parse_resolved(json::parse(R"({"/v/b":null})"), "/v/b", "x");
  REQUIRE(missing);
  CHECK_FALSE(missing->has_value());
  auto nodes =
      parse_resolved(json::parse(R"({"nodes":{"/v/a":{"node":{"id":"n2"}}}})"), "/v/a", "x");
  REQUIRE(nodes);
  CHECK((*nodes)->id == "n2");
  auto results =
      parse_resolved(json::parse(R"({"results":[{"path":"/v/a","nodeId":"n3"}]})"), "/v/a", "x");
  REQUIRE(results);
  CHECK((*results)->id == "n3");
}

TEST_CASE("pages parse from items, children, bare arrays; hasMore or totals", "[roset]") {
  auto items = parse_page(json::parse(R"({"items":[1,2],"total":5,"page":1,"pageSize":2})"), "x");
  REQUIRE(items);
  CHECK(items->items.size() == 2);
  CHECK(items->has_more);
  auto last = parse_page(json::parse(R"({"items":[5],"total":5,"page":3,"pageSize":2})"), "x");
  CHECK_FALSE(last->has_more);
  auto children =
      parse_page(json::parse(R"({"children":[1],"hasMore":true,"nextCursor":"c"})"), "x");
  CHECK(children->has_more);
  CHECK(children->next_cursor == "c");
  auto bare = parse_page(json::parse("[1,2,3]"), "x");
  CHECK(bare->items.size() == 3);
  CHECK_FALSE(parse_page(json::parse(R"({"nothing":1})"), "x"));
}

TEST_CASE("bodies that are not JSON are reported, not thrown", "[roset]") {
  auto parsed = parse_json_body("<html>", "look up node n");
  REQUIRE_FALSE(parsed);
  CHECK(parsed.status().message().find("look up node n") != std::string::npos);
  CHECK(parse_json_body("", "x")->is_null());
}

// Found by fuzz_roset_api_json (tests/fuzz): both were signed overflows (undefined behaviour),
// caught by UBSan, that the release build turned into wrong answers.
TEST_CASE("times beyond what nanoseconds hold are unparsable, not wrapped", "[roset]") {
  CHECK(parse_timestamp_ns("1012-05-01T12:34:56Z") == 0);
  CHECK(parse_timestamp_ns("9999-12-31T23:59:59.999Z") == 0);
  CHECK(parse_timestamp_ns("2200-01-01T00:00:00Z") == 7'258'118'400'000'000'000LL);
}

TEST_CASE("a page number far past the total has no more, without overflowing", "[roset]") {
  auto page = parse_page(json::parse(R"({"items":[],"page":4611686018427387904,"pageSize":4,
                                         "total":5})"),
                         "x");
  REQUIRE(page);
  CHECK_FALSE(page->has_more);
  auto second = parse_page(json::parse(R"({"items":[],"page":1,"pageSize":4,"total":5})"), "x");
  REQUIRE(second);
  CHECK(second->has_more);
  auto last = parse_page(json::parse(R"({"items":[],"page":2,"pageSize":4,"total":5})"), "x");
  REQUIRE(last);
  CHECK_FALSE(last->has_more);
}
