// A small JSON-over-HTTPS client for the Roset API on libcurl: one pool of reused handles (so
// connections are kept alive between calls), TLS verification always on, timeouts, retries per
// RetryPolicy, `Authorization: Bearer`. The key is sent in a header only and scrubbed from
// every message this client produces.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "providers/roset/retry_policy.h"

namespace rosetctl {

struct HttpRequest {
  std::string method = "GET";
  std::string url;              // absolute
  std::string body;             // JSON text; "" for none
  std::string idempotency_key;  // "" for none
  std::string mount_id;         // X-Roset-Mount-Id when not ""
  std::string what;             // for messages: `create folder "/volumes/db"`
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::optional<std::chrono::milliseconds> retry_after;
};

struct HttpSettings {
  std::string ca_bundle;  // "": the system store
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{30'000};
  RetryPolicy::Settings retry;
};

class HttpClient {
 public:
  explicit HttpClient(HttpSettings settings);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends with retries. Any HTTP status is a response (the caller maps it); transport failures
  // that outlast the retries are UNAVAILABLE (DEADLINE_EXCEEDED for timeouts), a TLS failure
  // is UNAVAILABLE at once, naming --roset-ca-bundle.
  Expected<HttpResponse> send(const HttpRequest& request, const std::string& api_key);

 private:
  class Handle;
  Expected<HttpResponse> send_once(void* curl, const HttpRequest& request,
                                   const std::string& api_key, AttemptOutcome* outcome);
  void* borrow();
  void give_back(void* curl);

  HttpSettings settings_;
  std::mutex mutex_;
  std::vector<void*> idle_;  // CURL* easy handles with their live connections; guarded by mutex_
  RetryPolicy retry_;        // guarded by mutex_ (its random engine)
};

}  // namespace rosetctl
