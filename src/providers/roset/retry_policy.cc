// Backoff arithmetic for the Roset HTTP client.
#include "providers/roset/retry_policy.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace rosetctl {

AttemptOutcome outcome_of_status(long http_status) {
  if (http_status >= 200 && http_status < 300) return AttemptOutcome::kSuccess;
  if (http_status == 429) return AttemptOutcome::kRateLimited;
  if (http_status >= 500 && http_status < 600) return AttemptOutcome::kServerError;
  return AttemptOutcome::kFinalError;
}

bool RetryPolicy::may_repeat(std::string_view method, bool has_idempotency_key) {
  if (method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE") return true;
  return has_idempotency_key;
}

bool RetryPolicy::should_retry(int attempt, AttemptOutcome outcome, std::string_view method,
                               bool has_idempotency_key) const {
  if (attempt >= settings_.max_attempts) return false;
  switch (outcome) {
    case AttemptOutcome::kRateLimited:
    case AttemptOutcome::kServerError:
    case AttemptOutcome::kConnectionError:
      return may_repeat(method, has_idempotency_key);
    case AttemptOutcome::kSuccess:
    case AttemptOutcome::kFinalError:
      return false;
  }
  return false;
}

std::chrono::milliseconds RetryPolicy::delay(int attempt,
                                             std::optional<std::chrono::milliseconds> retry_after) {
  if (retry_after && *retry_after <= settings_.max_retry_after) {
    return std::max(*retry_after, std::chrono::milliseconds(0));
  }
  int exponent = std::clamp(attempt - 1, 0, 30);
  double ceiling =
      std::min(static_cast<double>(settings_.base_delay.count()) * std::ldexp(1.0, exponent),
               static_cast<double>(settings_.max_delay.count()));
  // Full jitter: clients that failed together do not come back together.
  std::uniform_real_distribution<double> spread(0.0, ceiling);
  return std::chrono::milliseconds(static_cast<int64_t>(spread(random_)));
}

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value) {
  while (!value.empty() && value.front() == ' ')
    value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\r' || value.back() == '\n'))
    value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  double seconds = 0;
  auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (err != std::errc() || end != value.data() + value.size() || seconds < 0 ||
      !std::isfinite(seconds)) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace rosetctl
