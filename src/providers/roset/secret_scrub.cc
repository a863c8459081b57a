// Scrubbing the API key from text and from JSON bodies.
#include "providers/roset/secret_scrub.h"

#include <nlohmann/json.hpp>

namespace rosetctl {
namespace {

constexpr std::string_view kRedacted = "[redacted]";

// Scrubs every string (and object key) of `value` in place; true when one held the secret.
bool scrub_json(nlohmann::json& value, std::string_view secret) {
  if (value.is_string()) {
    auto& text = value.get_ref<std::string&>();
    if (text.find(secret) == std::string::npos) return false;
    text = scrub_secret(std::move(text), secret);
    return true;
  }
  bool changed = false;
  if (value.is_array()) {
    for (auto& item : value)
      changed = scrub_json(item, secret) || changed;
  } else if (value.is_object()) {
    bool in_a_key = false;
    for (auto& [key, item] : value.items()) {
      changed = scrub_json(item, secret) || changed;
      in_a_key = in_a_key || key.find(secret) != std::string::npos;
    }
    if (in_a_key) {
      nlohmann::json rebuilt = nlohmann::json::object();
      for (auto& [key, item] : value.items())
        rebuilt[scrub_secret(key, secret)] = std::move(item);
      value = std::move(rebuilt);
      changed = true;
    }
  }
  return changed;
}

}  // namespace

std::string scrub_secret(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos;
       at = text.find(secret, at + kRedacted.size())) {
    text.replace(at, secret.size(), kRedacted);
  }
  return text;
}

std::string scrub_secret_from_body(std::string body, std::string_view secret) {
  if (secret.empty()) return body;
  auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_discarded() && scrub_json(json, secret)) {
    body = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return scrub_secret(std::move(body), secret);
}

}  // namespace rosetctl
