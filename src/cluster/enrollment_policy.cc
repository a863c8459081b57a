// The checks of enrollment_policy.h.
#include "cluster/enrollment_policy.h"

#include <algorithm>

#include "core/validate.h"

namespace rosetctl {

Expected<std::string> node_proven_by(const TokenReviewResult& review,
                                     const EnrollmentPolicy& policy,
                                     std::string_view requested_node) {
  if (!review.authenticated) {
    return error(Code::kUnauthenticated,
                 "the Kubernetes API does not authenticate the token ({}): it is unknown, "
                 "expired, or not for audience {} (a projected serviceAccountToken with that "
                 "audience)",
                 review.error.empty() ? "no reason given" : escape_text(review.error),
                 display_quoted(policy.audience));
  }
  // TokenReview's contract: a client that sets spec.audiences checks them in the status, or an
  // API server that ignores audiences would pass a token made for anything.
  if (std::find(review.audiences.begin(), review.audiences.end(), policy.audience) ==
      review.audiences.end()) {
    return error(Code::kUnauthenticated,
                 "the Kubernetes API authenticated the token without confirming it is for "
                 "audience {}",
                 display_quoted(policy.audience));
  }
  if (review.username != policy.service_account) {
    return error(Code::kPermissionDenied,
                 "the token is {}'s, not the node plugin's ServiceAccount {}: only its pods get "
                 "node certificates",
                 display_quoted(review.username, 200), display_quoted(policy.service_account));
  }
  auto names = review.extra.find(std::string(kNodeNameExtra));
  if (names == review.extra.end() || names->second.size() != 1) {
    return error(Code::kPermissionDenied,
                 "the token names no node ({} in the review: Kubernetes 1.30 or later puts it in "
                 "a token bound to a pod, a projected serviceAccountToken)",
                 kNodeNameExtra);
  }
  const std::string& node = names->second.front();
  if (Status valid = validate_node_id(node, "the token's node name"); !valid) {
    return error(Code::kPermissionDenied, "{}", valid.message());
  }
  if (node != requested_node) {
    return error(Code::kPermissionDenied,
                 "the token proves node {}, and a certificate for node {} is never issued to it",
                 display_quoted(node), display_quoted(requested_node));
  }
  return node;
}

}  // namespace rosetctl
