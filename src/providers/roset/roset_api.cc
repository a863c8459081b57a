// Requests and responses of the Roset API calls.
#include "providers/roset/roset_api.h"

#include "core/random_id.h"
#include "core/validate.h"
#include "providers/roset/api_error.h"

namespace rosetctl {

using nlohmann::json;

std::string url_encode(std::string_view segment) {
  std::string out;
  for (unsigned char c : segment) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

Expected<HttpResponse> RosetApi::call(const std::string& method, const std::string& path,
                                      const json* body, const std::string& what,
                                      const std::string& idempotency_key) {
  HttpRequest request;
  request.method = method;
  request.url = endpoint_.api_url + path;
  request.body = body != nullptr ? body->dump() : "";
  request.idempotency_key = idempotency_key;
  request.mount_id = endpoint_.mount_id;
  request.what = what;
  // HttpClient hands back bodies and messages with the key scrubbed already.
  return http_.send(request, endpoint_.api_key);
}

Expected<json> RosetApi::call_ok(const std::string& method, const std::string& path,
                                 const json* body, const std::string& what,
                                 const std::string& idempotency_key) {
  auto response = call(method, path, body, what, idempotency_key);
  if (!response) return response.status();
  if (response->status < 200 || response->status >= 300) {
    return status_from_http(response->status, response->body, what);
  }
  return parse_json_body(response->body, what);
}

Status RosetApi::check_access() {
  std::string path =
      endpoint_.mount_id.empty() ? "/v1/mounts" : "/v1/mounts/" + url_encode(endpoint_.mount_id);
  std::string what = endpoint_.mount_id.empty()
                         ? std::string("list mounts")
                         : fmt::format("look up mount {}", display_quoted(endpoint_.mount_id));
  return call_ok("GET", path, nullptr, what).status();
}

Expected<RosetNode> RosetApi::create_folder(const std::string& name, const std::string& parent_path,
                                            const std::string& idempotency_key,
                                            std::string* existing_id) {
  json body = {{"name", name}, {"type", "folder"}, {"parentPath", parent_path}};
  if (!endpoint_.mount_id.empty()) body["mountId"] = endpoint_.mount_id;
  std::string full = parent_path == "/" ? "/" + name : parent_path + "/" + name;
  std::string what = fmt::format("create folder \"{}\"", full);
  auto response = call("POST", "/v1/nodes", &body, what, idempotency_key);
  if (!response) return response.status();
  if (response->status == 409) {
    if (existing_id != nullptr) *existing_id = parse_error_body(response->body).existing_node_id;
    return error(Code::kAlreadyExists, "Roset API: folder \"{}\" exists", full);
  }
  if (response->status < 200 || response->status >= 300) {
    return status_from_http(response->status, response->body, what);
  }
  auto parsed = parse_json_body(response->body, what);
  if (!parsed) return parsed.status();
  return parse_node(*parsed, what);
}

Expected<std::optional<RosetNode>> RosetApi::resolve(const std::string& path) {
  json body = {{"paths", json::array({path})}};
  if (!endpoint_.mount_id.empty()) body["mountId"] = endpoint_.mount_id;
  std::string what = fmt::format("resolve \"{}\"", path);
  // Resolving changes nothing, so it may be repeated like a GET; a fresh key per call, as a
  // replayed answer would be stale.
  auto parsed = call_ok("POST", "/v1/resolve", &body, what, "rosetctl-resolve-" + random_hex(12));
  if (!parsed) return parsed.status();
  return parse_resolved(*parsed, path, what);
}

Expected<RosetNode> RosetApi::get_node(const std::string& id) {
  std::string what = fmt::format("look up node {}", display_quoted(id));
  auto parsed = call_ok("GET", "/v1/nodes/" + url_encode(id), nullptr, what);
  if (!parsed) return parsed.status();
  return parse_node(*parsed, what);
}

Status RosetApi::delete_node(const std::string& id, bool permanent) {
  std::string path = "/v1/nodes/" + url_encode(id) + (permanent ? "/permanent" : "");
  std::string what =
      fmt::format("{} node {}", permanent ? "permanently delete" : "delete", display_quoted(id));
  auto response = call("DELETE", path, nullptr, what);
  if (!response) return response.status();
  if (response->status == 404 || (response->status >= 200 && response->status < 300)) {
    return Status::ok();
  }
  return status_from_http(response->status, response->body, what);
}

Expected<RosetCommit> RosetApi::create_commit(const std::string& node_id,
                                              const std::string& message,
                                              const std::string& idempotency_key) {
  std::string what = fmt::format("commit node {}", display_quoted(node_id));
  json body = {{"message", message}};
  auto response =
      call("POST", "/v1/nodes/" + url_encode(node_id) + "/commit", &body, what, idempotency_key);
  if (!response) return response.status();
  if (response->status == 404 || response->status == 405) {
    // The older form. A 404 of the newer form may also mean the node is gone: the older
    // endpoint then says so itself.
    json older = {{"node_id", node_id}, {"message", message}};
    // Another request, so another key: a server remembers the key with the 404 it answered.
    response = call("POST", "/v1/commits", &older, what, idempotency_key + "-older-form");
    if (!response) return response.status();
  }
  if (response->status < 200 || response->status >= 300) {
    return status_from_http(response->status, response->body, what);
  }
  auto parsed = parse_json_body(response->body, what);
  if (!parsed) return parsed.status();
  auto commit = parse_commit(*parsed, what);
  if (commit && commit->node_id.empty()) commit->node_id = node_id;
  return commit;
}

Expected<RosetCommit> RosetApi::get_commit(const std::string& id) {
  std::string what = fmt::format("look up commit {}", display_quoted(id));
  auto parsed = call_ok("GET", "/v1/commits/" + url_encode(id), nullptr, what);
  if (!parsed) return parsed.status();
  return parse_commit(*parsed, what);
}

Expected<std::vector<RosetCommit>> RosetApi::list_commits(const std::string& node_id) {
  std::vector<RosetCommit> out;
  std::string what = fmt::format("list commits of node {}", display_quoted(node_id));
  constexpr int kPageSize = 100;  // the API's maximum
  for (int page = 1; page <= 10'000; ++page) {
    std::string path = fmt::format("/v1/commits?nodeId={}&page={}&pageSize={}", url_encode(node_id),
                                   page, kPageSize);
    auto parsed = call_ok("GET", path, nullptr, what);
    if (!parsed) return parsed.status();
    auto listed = parse_page(*parsed, what);
    if (!listed) return listed.status();
    for (const json& item : listed->items) {
      auto commit = parse_commit(item, what);
      if (!commit) return commit.status();
      out.push_back(std::move(*commit));
    }
    if (!listed->has_more || listed->items.empty()) break;
  }
  return out;
}

Status RosetApi::put_ref(const std::string& name, const std::string& commit_id) {
  json body = {{"commit_id", commit_id}};
  return call_ok("PUT", "/v1/refs/" + url_encode(name), &body,
                 fmt::format("pin commit {} as ref \"{}\"", display_quoted(commit_id), name))
      .status();
}

Status RosetApi::delete_ref(const std::string& name) {
  std::string what = fmt::format("delete ref \"{}\"", name);
  auto response = call("DELETE", "/v1/refs/" + url_encode(name), nullptr, what);
  if (!response) return response.status();
  if (response->status == 404 || (response->status >= 200 && response->status < 300)) {
    return Status::ok();
  }
  return status_from_http(response->status, response->body, what);
}

}  // namespace rosetctl
