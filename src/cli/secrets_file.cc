#include "cli/secrets_file.h"

#include <nlohmann/json.hpp>

#include "core/private_file.h"
#include "core/validate.h"

namespace rosetctl::cli {
namespace {

constexpr size_t kMaxSecretsBytes = 64 * 1024;

}  // namespace

Expected<std::map<std::string, std::string>> read_secrets_file(const std::string& path) {
  auto content = read_private_file(path, "the secrets file", kMaxSecretsBytes);
  if (!content) return content.status();
  // Parse errors are not passed on: nlohmann's messages quote the text around the error.
  auto json = nlohmann::json::parse(*content, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return error(Code::kInvalidArgument,
                 "the secrets file \"{}\" is not a JSON object (expected e.g. {{\"api-key\": "
                 "\"...\"}})",
                 path);
  }
  std::map<std::string, std::string> secrets;
  for (const auto& [key, value] : json.items()) {
    if (key.empty() || !value.is_string()) {
      return error(Code::kInvalidArgument,
                   "the secrets file \"{}\" holds a value that is not a string under the key {}: "
                   "every secret is a string",
                   path, display_quoted(key, 128));
    }
    secrets.emplace(key, value.get<std::string>());
  }
  return secrets;
}

}  // namespace rosetctl::cli
