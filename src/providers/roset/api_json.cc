// Tolerant readers of Roset's JSON.
#include "providers/roset/api_json.h"

#include <ctime>
#include <limits>

namespace rosetctl {
namespace {

using nlohmann::json;

std::string text(const json& object, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it == object.end()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  }
  return "";
}

int64_t number(const json& object, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it != object.end() && it->is_number()) return it->get<int64_t>();
  }
  return 0;
}

// The object itself, or the one under `wrapper` when it is wrapped.
const json* unwrap(const json& body, const char* wrapper) {
  if (!body.is_object()) return nullptr;
  auto it = body.find(wrapper);
  if (it != body.end() && it->is_object()) return &*it;
  return &body;
}

Status unexpected(std::string_view what, std::string_view expected) {
  return error(Code::kInternal, "Roset API: {}: unexpected response (expected {})", what, expected);
}

}  // namespace

Expected<json> parse_json_body(std::string_view body, std::string_view what) {
  if (body.empty()) return json(nullptr);
  auto parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return unexpected(what, "a JSON body");
  return parsed;
}

Expected<RosetNode> parse_node(const json& body, std::string_view what) {
  const json* object = unwrap(body, "node");
  if (object == nullptr) return unexpected(what, "a node object");
  RosetNode node;
  node.id = text(*object, {"id", "nodeId", "node_id"});
  if (node.id.empty()) return unexpected(what, "a node with an id");
  node.name = text(*object, {"name"});
  node.type = text(*object, {"type"});
  node.parent_id = text(*object, {"parentId", "parent_id"});
  node.mount_id = text(*object, {"mountId", "mount_id"});
  auto deleted = object->find("deletedAt");
  if (deleted == object->end()) deleted = object->find("deleted_at");
  node.deleted = deleted != object->end() && !deleted->is_null();
  return node;
}

Expected<RosetCommit> parse_commit(const json& body, std::string_view what) {
  const json* object = unwrap(body, "commit");
  if (object == nullptr) return unexpected(what, "a commit object");
  RosetCommit commit;
  commit.id = text(*object, {"id", "commitId", "commit_id"});
  if (commit.id.empty()) return unexpected(what, "a commit with an id");
  commit.node_id = text(*object, {"nodeId", "node_id"});
  commit.status = text(*object, {"status"});
  commit.message = text(*object, {"message"});
  commit.error_message = text(*object, {"errorMessage", "error_message"});
  commit.created_at = text(*object, {"createdAt", "created_at"});
  if (auto stats = object->find("stats"); stats != object->end() && stats->is_object()) {
    commit.file_count = number(*stats, {"fileCount", "file_count"});
    commit.total_size = number(*stats, {"totalSize", "total_size"});
  }
  return commit;
}

Expected<std::optional<RosetNode>> parse_resolved(const json& body, std::string_view path,
                                                  std::string_view what) {
  if (!body.is_object()) return unexpected(what, "a resolve result object");
  std::string key(path);
  // {results: [{path, nodeId}]} (the docs)
  if (auto results = body.find("results"); results != body.end() && results->is_array()) {
    for (const json& entry : *results) {
      if (!entry.is_object() || text(entry, {"path"}) != key) continue;
      if (auto node = entry.find("node"); node != entry.end() && node->is_object()) {
        auto parsed = parse_node(*node, what);
        if (!parsed) return parsed.status();
        return std::optional<RosetNode>(*parsed);
      }
      std::string id = text(entry, {"nodeId", "node_id", "id"});
      if (id.empty()) return std::optional<RosetNode>();
      RosetNode node;
      node.id = id;
      node.type = text(entry, {"type"});
      return std::optional<RosetNode>(node);
    }
    return std::optional<RosetNode>();
  }
  // {nodes: {path: node|null}} (the FUSE client) or {path: node|null} (OpenAPI)
  const json* map = &body;
  if (auto nodes = body.find("nodes"); nodes != body.end() && nodes->is_object()) map = &*nodes;
  auto it = map->find(key);
  if (it == map->end() || it->is_null()) return std::optional<RosetNode>();
  auto parsed = parse_node(*it, what);
  if (!parsed) return parsed.status();
  return std::optional<RosetNode>(*parsed);
}

Expected<RosetPage> parse_page(const json& body, std::string_view what) {
  RosetPage page;
  const json* items = nullptr;
  if (body.is_array()) {
    items = &body;
  } else if (body.is_object()) {
    for (const char* key : {"items", "children", "commits", "refs", "data"}) {
      auto it = body.find(key);
      if (it != body.end() && it->is_array()) {
        items = &*it;
        break;
      }
    }
  }
  if (items == nullptr) return unexpected(what, "a list ({items: [...]})");
  page.items.assign(items->begin(), items->end());
  if (!body.is_object()) return page;
  if (auto more = body.find("hasMore"); more != body.end() && more->is_boolean()) {
    page.has_more = more->get<bool>();
  } else if (auto more_snake = body.find("has_more");
             more_snake != body.end() && more_snake->is_boolean()) {
    page.has_more = more_snake->get<bool>();
  } else {
    int64_t total = number(body, {"total"});
    int64_t number_of_page = number(body, {"page"});
    int64_t size = number(body, {"pageSize", "page_size"});
    // Compared as pages, not as number_of_page * size: the server's numbers may be big enough
    // for the product to overflow.
    page.has_more = total > 0 && number_of_page > 0 && size > 0 &&
                    number_of_page < total / size + (total % size != 0 ? 1 : 0);
  }
  page.next_cursor = text(body, {"nextCursor", "next_cursor"});
  return page;
}

int64_t parse_timestamp_ns(std::string_view value) {
  std::tm tm{};
  std::string copy(value);
  const char* rest = ::strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return 0;
  int64_t seconds = static_cast<int64_t>(::timegm(&tm));
  // Nanoseconds in an int64_t reach 292 years either side of 1970; a time outside (a server's
  // year 1012 or 9999) cannot be given and is as unparsable.
  constexpr int64_t kMaxSeconds = std::numeric_limits<int64_t>::max() / 1'000'000'000 - 1;
  if (seconds > kMaxSeconds || seconds < -kMaxSeconds) return 0;
  int64_t fraction_ns = 0;
  if (*rest == '.') {
    int64_t scale = 100'000'000;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, scale /= 10)
      fraction_ns += (*rest - '0') * scale;
  }
  return seconds * 1'000'000'000 + fraction_ns;
}

}  // namespace rosetctl
