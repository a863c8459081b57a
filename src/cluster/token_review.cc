// The TokenReview client (token_review.h) on libcurl (core/curl_library.h).
#include "cluster/token_review.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/curl_library.h"
#include "core/unique_fd.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr std::size_t kMaxTokenBytes = 64 * 1024;
constexpr std::size_t kMaxAnswerBytes = 1 << 20;
constexpr const char* kReviewPath = "/apis/authentication.k8s.io/v1/tokenreviews";

// An answer's body, wiped when dropped: the API server echoes the reviewed token in it.
struct ReviewAnswer {
  std::string body;
  bool too_long = false;
  ~ReviewAnswer() { ::explicit_bzero(body.data(), body.size()); }
};

size_t collect_answer(char* data, size_t size, size_t count, void* user) {
  auto* answer = static_cast<ReviewAnswer*>(user);
  if (answer->body.size() + size * count > kMaxAnswerBytes) {
    answer->too_long = true;
    return 0;  // curl stops with CURLE_WRITE_ERROR
  }
  answer->body.append(data, size * count);
  return size * count;
}

std::string token_scrubbed(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at))
    text.replace(at, secret.size(), "[token]");
  return text;
}

// A header list freed on every path.
struct ReviewHeaders {
  const CurlLibrary& curl;
  curl_slist* list = nullptr;
  ~ReviewHeaders() { curl.slist_free_all(list); }
  void add(const char* line) { list = curl.slist_append(list, line); }
};

struct ReviewHandle {
  const CurlLibrary& curl;
  CURL* easy;
  ~ReviewHandle() {
    if (easy != nullptr) curl.easy_cleanup(easy);
  }
};

}  // namespace

std::string in_cluster_api_url() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') return "";
  std::string_view h(host);
  return h.find(':') != std::string_view::npos ? fmt::format("https://[{}]:{}", h, port)
                                               : fmt::format("https://{}:{}", h, port);
}

Expected<SecretText> read_bearer_token(const std::string& path, std::string_view what) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return errno_status(errno, fmt::format("{} \"{}\" cannot be read", what, path));
  struct stat facts = {};
  if (::fstat(fd.get(), &facts) != 0 || !S_ISREG(facts.st_mode)) {
    return error(Code::kInvalidArgument, "{} \"{}\" is not a regular file", what, path);
  }
  std::string text(kMaxTokenBytes + 1, '\0');
  size_t filled = 0;
  while (filled < text.size()) {
    ssize_t got = ::read(fd.get(), text.data() + filled, text.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_status(errno, fmt::format("cannot read {} \"{}\"", what, path));
    if (got == 0) break;
    filled += static_cast<size_t>(got);
  }
  SecretText whole(std::move(text));  // wiped whatever happens below
  if (filled > kMaxTokenBytes) {
    return error(Code::kInvalidArgument, "{} \"{}\" is over {} bytes", what, path, kMaxTokenBytes);
  }
  std::string_view token = whole.view().substr(0, filled);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
    token.remove_suffix(1);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front())))
    token.remove_prefix(1);
  for (char c : token) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return error(Code::kInvalidArgument,
                   "{} \"{}\" holds white space or a control character inside the token", what,
                   path);
    }
  }
  if (token.empty()) return error(Code::kInvalidArgument, "{} \"{}\" is empty", what, path);
  return SecretText(std::string(token));
}

SecretText token_review_body(const SecretText& token, std::string_view audience) {
  nlohmann::json body = {
      {"apiVersion", "authentication.k8s.io/v1"},
      {"kind", "TokenReview"},
      {"spec", {{"token", std::string(token.view())}, {"audiences", {std::string(audience)}}}},
  };
  std::string text = body.dump();
  std::string& held = body["spec"]["token"].get_ref<std::string&>();
  ::explicit_bzero(held.data(), held.size());
  return SecretText(std::move(text));
}

Expected<TokenReviewResult> parse_token_review(std::string_view body, const SecretText& token) {
  auto json = nlohmann::json::parse(body, nullptr, false);
  // Only what has the documented type is read: nothing here throws on a hostile answer.
  auto text = [](const nlohmann::json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (!json.is_object() || text(json, "kind") != "TokenReview" ||
      text(json, "apiVersion") != "authentication.k8s.io/v1") {
    return error(Code::kInternal,
                 "the API server's answer is no authentication.k8s.io/v1 "
                 "TokenReview");
  }
  TokenReviewResult result;
  auto status = json.find("status");
  if (status == json.end() || !status->is_object()) return result;  // not authenticated
  auto text_list = [](const nlohmann::json& value) {
    std::vector<std::string> out;
    if (value.is_array()) {
      for (const auto& item : value)
        if (item.is_string()) out.push_back(item.get<std::string>());
    }
    return out;
  };
  auto authenticated = status->find("authenticated");
  result.authenticated =
      authenticated != status->end() && authenticated->is_boolean() && authenticated->get<bool>();
  result.error = token_scrubbed(text(*status, "error"), token.view());
  if (auto a = status->find("audiences"); a != status->end()) result.audiences = text_list(*a);
  auto user = status->find("user");
  if (user != status->end() && user->is_object()) {
    result.username = text(*user, "username");
    result.uid = text(*user, "uid");
    if (auto g = user->find("groups"); g != user->end()) result.groups = text_list(*g);
    if (auto x = user->find("extra"); x != user->end() && x->is_object()) {
      for (const auto& [key, values] : x->items())
        result.extra[key] = text_list(values);
    }
  }
  return result;
}

Expected<TokenReviewResult> review_token(const TokenReviewSettings& settings,
                                         const SecretText& token, std::string_view audience) {
  auto loaded = CurlLibrary::get();
  if (!loaded) return loaded.status();
  const CurlLibrary& curl = **loaded;
  if (settings.api_url.empty()) {
    return error(Code::kFailedPrecondition,
                 "no Kubernetes API server to review tokens with (--kube-api-url, or "
                 "KUBERNETES_SERVICE_HOST in a pod)");
  }
  auto credential = read_bearer_token(
      settings.credential_file, "the controller's ServiceAccount token (--kube-api-token-file)");
  if (!credential) return error(Code::kUnavailable, "{}", credential.status().message());
  SecretText authorization(fmt::format("Authorization: Bearer {}", credential->view()));
  SecretText body = token_review_body(token, audience);
  std::string url = settings.api_url + kReviewPath;

  ReviewHandle handle{curl, curl.easy_init()};
  if (handle.easy == nullptr) return error(Code::kInternal, "cannot create a libcurl handle");
  ReviewHeaders headers{curl};
  headers.add("Accept: application/json");
  headers.add("Content-Type: application/json");
  headers.add(authorization.view().data());  // a whole std::string's: NUL-terminated
  headers.add("Expect:");
  ReviewAnswer answer;
  CURL* easy = handle.easy;
  curl.easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl.easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "https");
  curl.easy_setopt(easy, CURLOPT_POST, 1L);
  curl.easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.view().size()));
  curl.easy_setopt(easy, CURLOPT_POSTFIELDS, body.view().data());  // not copied: ours is wiped
  curl.easy_setopt(easy, CURLOPT_HTTPHEADER, headers.list);
  curl.easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect_answer);
  curl.easy_setopt(easy, CURLOPT_WRITEDATA, &answer);
  curl.easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl.easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(settings.timeout.count()));
  curl.easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
  curl.easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
  curl.easy_setopt(easy, CURLOPT_CAINFO, settings.ca_file.c_str());
  curl.easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect would carry the credential
  curl.easy_setopt(easy, CURLOPT_USERAGENT, "rosetctl");
  CURLcode code = curl.easy_perform(easy);
  if (code != CURLE_OK) {
    return error(Code::kUnavailable, "cannot review the token with the Kubernetes API at {}: {}",
                 display_quoted(settings.api_url),
                 answer.too_long ? "its answer is over 1 MiB" : curl.easy_strerror(code));
  }
  long http = 0;
  curl.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
  if (http == 401) {
    return error(Code::kUnavailable,
                 "the Kubernetes API at {} does not accept the controller's own credentials "
                 "(HTTP 401; --kube-api-token-file)",
                 display_quoted(settings.api_url));
  }
  if (http == 403) {
    return error(Code::kUnavailable,
                 "the controller's ServiceAccount may not create tokenreviews (HTTP 403): its "
                 "ClusterRole needs authentication.k8s.io tokenreviews, verb create");
  }
  if (http != 200 && http != 201) {
    return error(Code::kUnavailable, "the Kubernetes API at {} answered a TokenReview with HTTP {}",
                 display_quoted(settings.api_url), http);
  }
  return parse_token_review(answer.body, token);
}

}  // namespace rosetctl
