// When the Roset client retries and how long it waits (providers/roset/retry_policy.cc).
#include <catch2/catch.hpp>

#include "providers/roset/retry_policy.h"

using namespace rosetctl;
using std::chrono::milliseconds;

TEST_CASE("only idempotent requests or keyed mutations are repeated", "[roset]") {
  CHECK(RetryPolicy::may_repeat("GET", false));
  CHECK(RetryPolicy::may_repeat("PUT", false));
  CHECK(RetryPolicy::may_repeat("DELETE", false));
  CHECK_FALSE(RetryPolicy::may_repeat("POST", false));
  CHECK_FALSE(RetryPolicy::may_repeat("PATCH", false));
  CHECK(RetryPolicy::may_repeat("POST", true));
}

TEST_CASE("429, 5xx and connection errors are retried until the attempts run out", "[roset]") {
  RetryPolicy policy(RetryPolicy::Settings{3, milliseconds(100), milliseconds(1000)}, 7);
  CHECK(policy.should_retry(1, AttemptOutcome::kRateLimited, "GET", false));
  CHECK(policy.should_retry(2, AttemptOutcome::kServerError, "POST", true));
  CHECK(policy.should_retry(1, AttemptOutcome::kConnectionError, "DELETE", false));
  CHECK_FALSE(policy.should_retry(3, AttemptOutcome::kServerError, "GET", false));
  CHECK_FALSE(policy.should_retry(1, AttemptOutcome::kServerError, "POST", false));
  CHECK_FALSE(policy.should_retry(1, AttemptOutcome::kFinalError, "GET", false));
  CHECK_FALSE(policy.should_retry(1, AttemptOutcome::kSuccess, "GET", false));
}

TEST_CASE("by default a request is attempted 5 times in all, as README promises", "[roset]") {
  RetryPolicy policy;
  for (int attempt = 1; attempt < 5; ++attempt)
    CHECK(policy.should_retry(attempt, AttemptOutcome::kServerError, "POST", true));
  CHECK_FALSE(policy.should_retry(5, AttemptOutcome::kServerError, "POST", true));
}

TEST_CASE("statuses are classified for retrying", "[roset]") {
  CHECK(outcome_of_status(201) == AttemptOutcome::kSuccess);
  CHECK(outcome_of_status(429) == AttemptOutcome::kRateLimited);
  CHECK(outcome_of_status(503) == AttemptOutcome::kServerError);
  CHECK(outcome_of_status(404) == AttemptOutcome::kFinalError);
}

TEST_CASE("backoff grows exponentially with full jitter under a cap", "[roset]") {
  RetryPolicy policy(RetryPolicy::Settings{10, milliseconds(100), milliseconds(1000)}, 42);
  for (int round = 0; round < 200; ++round) {
    CHECK(policy.delay(1, std::nullopt) <= milliseconds(100));
    CHECK(policy.delay(3, std::nullopt) <= milliseconds(400));
    CHECK(policy.delay(9, std::nullopt) <= milliseconds(1000));
  }
  milliseconds largest{0};
  for (int round = 0; round < 200; ++round)
    largest = std::max(largest, policy.delay(4, std::nullopt));
  CHECK(largest > milliseconds(400));  // the range really widens
}

TEST_CASE("Retry-After is honoured when given and reasonable", "[roset]") {
  RetryPolicy policy(
      RetryPolicy::Settings{5, milliseconds(100), milliseconds(1000), milliseconds(30'000)}, 1);
  CHECK(policy.delay(1, milliseconds(2500)) == milliseconds(2500));
  CHECK(policy.delay(1, milliseconds(60'000)) <= milliseconds(100));  // too long: backoff instead
}

TEST_CASE("Retry-After values parse as seconds", "[roset]") {
  CHECK(parse_retry_after(" 3\r\n") == milliseconds(3000));
  CHECK(parse_retry_after("1.5") == milliseconds(1500));
  CHECK(parse_retry_after("0") == milliseconds(0));
  CHECK_FALSE(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"));
  CHECK_FALSE(parse_retry_after("-1"));
  CHECK_FALSE(parse_retry_after(""));
}
