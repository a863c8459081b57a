// Resolution of the Roset endpoint and credentials for one call.
#include "providers/roset/roset_config.h"

#include <cctype>

#include "core/private_file.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr size_t kMaxKeyBytes = 4096;

std::string trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return std::string(text);
}

std::string secret_value(const std::map<std::string, std::string>& secrets,
                         std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = secrets.find(key);
    if (it != secrets.end() && !trim(it->second).empty()) return trim(it->second);
  }
  return "";
}

}  // namespace

Expected<std::string> normalize_api_url(std::string_view url, std::string_view what) {
  std::string text = trim(url);
  auto bad = [&](std::string_view why) {
    return error(Code::kInvalidArgument, "{} {} is not a Roset API URL: {}", what,
                 display_quoted(text, 200), why);
  };
  std::string_view rest = text;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return bad("it must start with https:// (or http:// for on-premise and tests)");
  }
  std::string_view host = rest.substr(0, rest.find('/'));
  if (host.empty()) return bad("it names no host");
  for (char c : text) {
    if (c == '?' || c == '#' || c == ' ' || std::iscntrl(static_cast<unsigned char>(c))) {
      return bad("it must not contain a query, fragment, spaces or control characters");
    }
  }
  if (host.find('@') != std::string_view::npos) return bad("credentials do not belong in the URL");
  while (text.ends_with('/'))
    text.pop_back();
  return text;
}

Expected<std::string> read_api_key_file(const std::string& path) {
  auto content = read_private_file(path, "the Roset API key file", kMaxKeyBytes);
  if (!content) return content.status();
  std::string key = trim(content->substr(0, content->find('\n')));
  if (key.empty()) {
    return error(Code::kUnauthenticated, "the Roset API key file \"{}\" is empty", path);
  }
  return key;
}

Expected<RosetEndpoint> resolve_endpoint(const RosetConfig& config,
                                         const std::map<std::string, std::string>& secrets,
                                         std::string_view context_url, std::string_view mount_id,
                                         KeyUse use) {
  RosetEndpoint endpoint;
  std::string url = secret_value(secrets, {"api-url", "apiUrl"});
  std::string_view url_source = "secret api-url";
  if (url.empty() && !context_url.empty()) {
    url = context_url;
    url_source = "volume context apiUrl";
  }
  if (url.empty()) {
    url = config.api_url.empty() ? kDefaultRosetApiUrl : config.api_url;
    url_source = "--roset-api-url";
  }
  auto normal = normalize_api_url(url, url_source);
  if (!normal) return normal.status();
  endpoint.api_url = *normal;
  endpoint.mount_id = mount_id.empty() ? config.mount_id : std::string(mount_id);

  endpoint.api_key = secret_value(secrets, {"api-key", "apiKey"});
  if (endpoint.api_key.empty() && !config.api_key_file.empty()) {
    auto key = read_api_key_file(config.api_key_file);
    if (!key) return key.status();
    endpoint.api_key = *key;
  }
  if (endpoint.api_key.empty()) endpoint.api_key = trim(config.api_key);
  if (endpoint.api_key.empty()) {
    // Which host lacks it: across hosts the controller's answer is printed on a consumer,
    // whose own key file changes nothing there.
    if (use == KeyUse::kFuse) {
      return error(Code::kUnauthenticated,
                   "no Roset API key on this host, which mounts roset volumes with roset-fuse: "
                   "give the CSI secret \"api-key\", or set roset-api-key-file "
                   "(ROSET_API_KEY_FILE) or ROSET_API_KEY in this host's configuration");
    }
    return error(Code::kUnauthenticated,
                 "no Roset API key on the controller host, which makes roset volumes and commits "
                 "through the Roset API: give the CSI secret \"api-key\", or set "
                 "roset-api-key-file (ROSET_API_KEY_FILE) or ROSET_API_KEY where the controller "
                 "runs (its serve --role controller; this host's configuration without "
                 "--controller); a consumer's own key does not reach it");
  }
  return endpoint;
}

}  // namespace rosetctl
