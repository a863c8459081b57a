// When a Roset API request is tried again, and after how long: exponential backoff with jitter,
// Retry-After honoured, and never a second attempt of a mutation the server could apply twice.
#pragma once

#include <chrono>
#include <optional>
#include <random>
#include <string_view>

namespace rosetctl {

// What one attempt ended with, as far as retrying is concerned.
enum class AttemptOutcome {
  kSuccess,          // 2xx
  kRateLimited,      // 429
  kServerError,      // 5xx
  kConnectionError,  // refused, reset, timed out, dropped mid-response
  kFinalError,       // anything else (4xx, TLS verification): retrying cannot help
};

AttemptOutcome outcome_of_status(long http_status);

class RetryPolicy {
 public:
  struct Settings {
    int max_attempts = 5;  // in all, the first included (README: "up to 5 attempts")
    std::chrono::milliseconds base_delay{200};
    std::chrono::milliseconds max_delay{10'000};
    // A Retry-After longer than this is not waited for: the call fails, saying when to retry.
    std::chrono::milliseconds max_retry_after{30'000};
  };

  RetryPolicy() : RetryPolicy(Settings{}) {}
  explicit RetryPolicy(Settings settings, unsigned seed = std::random_device{}())
      : settings_(settings), random_(seed) {}

  const Settings& settings() const { return settings_; }

  // GET, HEAD, PUT and DELETE may be repeated; POST and PATCH only with an Idempotency-Key.
  static bool may_repeat(std::string_view method, bool has_idempotency_key);

  // Whether attempt number `attempt` (1-based, just finished) should be followed by another.
  bool should_retry(int attempt, AttemptOutcome outcome, std::string_view method,
                    bool has_idempotency_key) const;

  // The pause before attempt `attempt + 1`: Retry-After when the server gave one (and it is
  // not above max_retry_after), else full jitter over base * 2^(attempt-1), capped.
  std::chrono::milliseconds delay(int attempt,
                                  std::optional<std::chrono::milliseconds> retry_after);

 private:
  Settings settings_;
  std::mt19937 random_;
};

// Parses a Retry-After header value: delta seconds ("3", "1.5"); HTTP dates are not used by
// the Roset API and give nullopt, as does anything unparsable.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value);

}  // namespace rosetctl
