// HTTP status and error body → Status.
#include "providers/roset/api_error.h"

#include <nlohmann/json.hpp>

#include "core/validate.h"

namespace rosetctl {
namespace {

std::string string_field(const nlohmann::json& object, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it != object.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

Code code_for(long http_status) {
  switch (http_status) {
    case 400:
    case 422:
      return Code::kInvalidArgument;
    case 401:
      return Code::kUnauthenticated;
    case 402:
      return Code::kResourceExhausted;
    case 403:
      return Code::kPermissionDenied;
    case 404:
    case 410:
      return Code::kNotFound;
    case 409:
      return Code::kAlreadyExists;
    case 429:
    case 502:
    case 503:
    case 504:
      return Code::kUnavailable;
    case 501:
      return Code::kUnimplemented;
    default:
      return http_status >= 500 ? Code::kInternal : Code::kUnknown;
  }
}

std::string advice_for(long http_status) {
  switch (http_status) {
    case 401:
      return "; the API key was not accepted: check the \"api-key\" secret, "
             "--roset-api-key-file (ROSET_API_KEY_FILE) or ROSET_API_KEY";
    case 403:
      return "; the API key is valid but may not do this (its scopes or the mount's access)";
    case 429:
      return "; Roset kept rate-limiting after several retries: try again later";
    case 502:
    case 503:
    case 504:
      return "; the Roset API is unavailable right now: try again later";
    default:
      return "";
  }
}

}  // namespace

ApiErrorBody parse_error_body(std::string_view body) {
  ApiErrorBody out;
  auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return out;
  // Some clients see the error object nested: {"error": {"message", "code"}}.
  const nlohmann::json* object = &json;
  if (auto it = json.find("error"); it != json.end() && it->is_object()) object = &*it;
  out.message = string_field(*object, {"error", "message"});
  out.code = string_field(*object, {"code"});
  out.request_id = string_field(json, {"requestId", "request_id"});
  if (auto details = object->find("details"); details != object->end() && details->is_object()) {
    out.existing_node_id = string_field(*details, {"existingNodeId", "existing_node_id"});
  }
  return out;
}

Status status_from_http(long http_status, std::string_view body, std::string_view what) {
  ApiErrorBody parsed = parse_error_body(body);
  std::string detail =
      parsed.message.empty() ? "" : ": " + escape_text(parsed.message.substr(0, 300));
  std::string code =
      parsed.code.empty() ? "" : fmt::format(" {}", escape_text(parsed.code.substr(0, 64)));
  std::string request =
      parsed.request_id.empty()
          ? ""
          : fmt::format(" (request {})", escape_text(parsed.request_id.substr(0, 64)));
  return {code_for(http_status),
          fmt::format("Roset API: {} failed: HTTP {}{}{}{}{}", what, http_status, code, detail,
                      request, advice_for(http_status))};
}

}  // namespace rosetctl
