// Parsing of Roset API responses. Clients of the API disagree on shapes (roset-api.md §2-3):
// objects come bare or wrapped ({node}, {commit}), fields in camelCase or snake_case, lists as
// {items}, {children}, {commits} or a bare array, resolve results as a path map, {nodes} or
// {results}. Every parser here accepts all of them; a response of none of these shapes is
// INTERNAL naming what was expected.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

struct RosetNode {
  std::string id;
  std::string name;
  std::string type;  // "file" | "folder"
  std::string parent_id;
  std::string mount_id;
  bool deleted = false;  // deletedAt set: in the trash
};

struct RosetCommit {
  std::string id;
  std::string node_id;
  std::string status;  // "pending" | "completed" | "failed" ("" when the response had none)
  std::string message;
  std::string error_message;
  std::string created_at;  // ISO 8601 as sent
  int64_t file_count = 0;
  int64_t total_size = 0;
};

struct RosetPage {
  std::vector<nlohmann::json> items;
  bool has_more = false;
  std::string next_cursor;
};

// Bodies are parsed from text so a non-JSON body is reported, not thrown.
Expected<nlohmann::json> parse_json_body(std::string_view body, std::string_view what);

Expected<RosetNode> parse_node(const nlohmann::json& body, std::string_view what);
Expected<RosetCommit> parse_commit(const nlohmann::json& body, std::string_view what);
// The result of `POST /v1/resolve {paths:[path]}`: the node, or nullopt when it does not exist.
Expected<std::optional<RosetNode>> parse_resolved(const nlohmann::json& body, std::string_view path,
                                                  std::string_view what);
// A page of a list; `page`/`pageSize`/`total` give has_more when `hasMore` is absent.
Expected<RosetPage> parse_page(const nlohmann::json& body, std::string_view what);

// ISO 8601 "2024-05-01T12:34:56(.123)Z" → unix nanoseconds; 0 when unparsable.
int64_t parse_timestamp_ns(std::string_view text);

}  // namespace rosetctl
