// What a TokenReview must say for the controller to issue a node certificate
// (cluster/enrollment_service.h): the token is authenticated for the enrollment audience, it is
// the node plugin's ServiceAccount's, and Kubernetes bound it to a pod on a node, whose name
// (the review's user.extra["authentication.kubernetes.io/node-name"], Kubernetes 1.30+) is the
// certificate's node id. Nothing the caller says names the node: a request for another node
// than the token's is refused.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "cluster/token_review.h"
#include "core/status.h"

namespace rosetctl {

inline constexpr std::string_view kNodeNameExtra = "authentication.kubernetes.io/node-name";
inline constexpr std::string_view kPodNameExtra = "authentication.kubernetes.io/pod-name";
inline constexpr const char* kDefaultEnrollmentAudience = "rosetctl.io/enroll";
inline constexpr const char* kDefaultNodeServiceAccount =
    "system:serviceaccount:rosetctl:rosetctl-node";

struct EnrollmentPolicy {
  std::string audience = kDefaultEnrollmentAudience;
  std::string service_account = kDefaultNodeServiceAccount;  // the username a review must name
  std::chrono::seconds validity = std::chrono::hours(24);    // of the certificates issued
};

// The node `review` proves, when it is `requested_node`. UNAUTHENTICATED when the review does
// not authenticate the token or does not confirm the audience; PERMISSION_DENIED when it is
// another user's, names no node (or a node id rosetctl refuses), or names another node than
// `requested_node`. Messages name users and nodes, never the token.
Expected<std::string> node_proven_by(const TokenReviewResult& review,
                                     const EnrollmentPolicy& policy,
                                     std::string_view requested_node);

}  // namespace rosetctl
