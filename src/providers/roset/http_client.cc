// libcurl behind HttpClient. Handles are pooled rather than made per call: curl keeps each
// handle's connections open, so a pooled handle talks keep-alive to the API.
#include "providers/roset/http_client.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "core/curl_library.h"
#include "providers/roset/secret_scrub.h"

namespace rosetctl {
namespace {

using Clock = std::chrono::steady_clock;

// Only called once send() has loaded the library.
const CurlLibrary& curl_api() {
  return **CurlLibrary::get();
}

// A curl header list, freed on every path.
class HeaderList {
 public:
  HeaderList() = default;
  ~HeaderList() { curl_api().slist_free_all(list_); }
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  void add(const std::string& header) { list_ = curl_api().slist_append(list_, header.c_str()); }
  curl_slist* get() const { return list_; }

 private:
  curl_slist* list_ = nullptr;
};

size_t collect_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t collect_header(char* data, size_t size, size_t count, void* user) {
  std::string_view line(data, size * count);
  constexpr std::string_view kRetryAfter = "retry-after:";
  if (line.size() > kRetryAfter.size()) {
    std::string name(line.substr(0, kRetryAfter.size()));
    for (char& c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == kRetryAfter) {
      *static_cast<std::optional<std::chrono::milliseconds>*>(user) =
          parse_retry_after(line.substr(kRetryAfter.size()));
    }
  }
  return size * count;
}

// The body's `retryAfter` (seconds), which the TypeScript SDK reads when no header is sent.
std::optional<std::chrono::milliseconds> body_retry_after(const std::string& body) {
  auto json = nlohmann::json::parse(body, nullptr, false);
  if (!json.is_object()) return std::nullopt;
  auto it = json.find("retryAfter");
  if (it == json.end() || !it->is_number() || it->get<double>() < 0) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(it->get<double>() * 1000.0));
}

bool is_tls_failure(CURLcode code) {
  return code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CONNECT_ERROR ||
         code == CURLE_SSL_CACERT_BADFILE || code == CURLE_SSL_CERTPROBLEM;
}

std::string origin_of(const std::string& url) {
  size_t scheme = url.find("://");
  size_t path = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  return url.substr(0, path);
}

// A header value with a line break would end its header and start another: refused, naming
// the header, never quoting the value (it may be the key).
Status check_header_value(std::string_view value, std::string_view header) {
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return error(Code::kInvalidArgument,
                   "Roset API: the {} holds a control character; it cannot be sent in a header",
                   header);
    }
  }
  return Status::ok();
}

}  // namespace

HttpClient::HttpClient(HttpSettings settings)
    : settings_(std::move(settings)), retry_(settings_.retry) {}

HttpClient::~HttpClient() {
  for (void* curl : idle_)
    curl_api().easy_cleanup(static_cast<CURL*>(curl));
}

void* HttpClient::borrow() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      void* curl = idle_.back();
      idle_.pop_back();
      return curl;
    }
  }
  return curl_api().easy_init();
}

void HttpClient::give_back(void* curl) {
  std::lock_guard lock(mutex_);
  idle_.push_back(curl);
}

Expected<HttpResponse> HttpClient::send_once(void* handle, const HttpRequest& request,
                                             const std::string& api_key, AttemptOutcome* outcome) {
  const CurlLibrary& api = curl_api();
  CURL* curl = static_cast<CURL*>(handle);
  api.easy_reset(curl);  // options only: the handle's open connections stay
  HeaderList headers;
  headers.add("Accept: application/json");
  headers.add("Authorization: Bearer " + api_key);
  if (!request.body.empty()) headers.add("Content-Type: application/json");
  if (!request.idempotency_key.empty()) headers.add("Idempotency-Key: " + request.idempotency_key);
  if (!request.mount_id.empty()) headers.add("X-Roset-Mount-Id: " + request.mount_id);
  headers.add("Expect:");  // no 100-continue round trip for small JSON bodies

  HttpResponse response;
  api.easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  api.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  if (request.method == "HEAD") api.easy_setopt(curl, CURLOPT_NOBODY, 1L);
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    api.easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
    api.easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, request.body.c_str());
    api.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());
  api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect_body);
  api.easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  api.easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect_header);
  api.easy_setopt(curl, CURLOPT_HEADERDATA, &response.retry_after);
  api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // many threads; no SIGALRM for DNS timeouts
  api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                  static_cast<long>(settings_.connect_timeout.count()));
  api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(settings_.request_timeout.count()));
  api.easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  api.easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!settings_.ca_bundle.empty()) {
    api.easy_setopt(curl, CURLOPT_CAINFO, settings_.ca_bundle.c_str());
  }
  api.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect would carry the key elsewhere
  api.easy_setopt(curl, CURLOPT_USERAGENT, "rosetctl");

  CURLcode code = api.easy_perform(curl);
  if (code != CURLE_OK) {
    std::string reason = scrub_secret(api.easy_strerror(code), api_key);
    if (is_tls_failure(code)) {
      *outcome = AttemptOutcome::kFinalError;
      return error(Code::kUnavailable,
                   "Roset API: {}: TLS with {} failed ({}); if it uses a private CA, give its "
                   "bundle with --roset-ca-bundle",
                   request.what, origin_of(request.url), reason);
    }
    *outcome = AttemptOutcome::kConnectionError;
    Code status = code == CURLE_OPERATION_TIMEDOUT ? Code::kDeadlineExceeded : Code::kUnavailable;
    return Status(status, fmt::format("Roset API: {}: cannot reach {}: {}", request.what,
                                      origin_of(request.url), reason));
  }
  api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  // The one place bodies come in: nothing built from one (an error message, a log line, a
  // commit's failure reason) can carry the key, even from a server that echoes the request.
  response.body = scrub_secret_from_body(std::move(response.body), api_key);
  if (!response.retry_after && response.status == 429) {
    response.retry_after = body_retry_after(response.body);
  }
  *outcome = outcome_of_status(response.status);
  return response;
}

Expected<HttpResponse> HttpClient::send(const HttpRequest& request, const std::string& api_key) {
  if (auto loaded = CurlLibrary::get(); !loaded) return loaded.status();
  ROSETCTL_RETURN_IF_ERROR(check_header_value(api_key, "API key"));
  ROSETCTL_RETURN_IF_ERROR(check_header_value(request.mount_id, "mount id"));
  ROSETCTL_RETURN_IF_ERROR(check_header_value(request.idempotency_key, "Idempotency-Key"));
  struct Borrowed {
    HttpClient& client;
    void* curl;
    ~Borrowed() {
      if (curl != nullptr) client.give_back(curl);
    }
    // A fresh handle, so the next attempt opens a new connection: the old one may be in any
    // state after a server in trouble answered on it (a request body it never read would be
    // taken for the start of the next request, losing that attempt).
    void renew() {
      curl_api().easy_cleanup(static_cast<CURL*>(curl));
      curl = curl_api().easy_init();
    }
  } borrowed{*this, borrow()};
  if (borrowed.curl == nullptr) return error(Code::kInternal, "cannot create a libcurl handle");

  bool keyed = !request.idempotency_key.empty();
  for (int attempt = 1;; ++attempt) {
    auto started = Clock::now();
    AttemptOutcome outcome = AttemptOutcome::kFinalError;
    auto response = send_once(borrowed.curl, request, api_key, &outcome);
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    spdlog::debug("roset api: {} {} attempt {} -> {} ({} ms)", request.method, request.url, attempt,
                  response ? fmt::format("HTTP {}", response->status)
                           : std::string(code_name(response.status().code())),
                  took.count());
    std::optional<std::chrono::milliseconds> retry_after =
        response ? response->retry_after : std::nullopt;
    if (retry_after && *retry_after > settings_.retry.max_retry_after) {
      return error(Code::kUnavailable,
                   "Roset API: {}: rate-limited; the server asks to wait {} s before retrying",
                   request.what, retry_after->count() / 1000);
    }
    std::chrono::milliseconds pause{0};
    {
      std::lock_guard lock(mutex_);
      if (!retry_.should_retry(attempt, outcome, request.method, keyed)) return response;
      pause = retry_.delay(attempt, retry_after);
    }
    spdlog::debug("roset api: {} {}: retrying in {} ms", request.method, request.url,
                  pause.count());
    std::this_thread::sleep_for(pause);
    borrowed.renew();
    if (borrowed.curl == nullptr) return error(Code::kInternal, "cannot create a libcurl handle");
  }
}

}  // namespace rosetctl
