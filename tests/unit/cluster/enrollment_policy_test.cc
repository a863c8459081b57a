// Tests for src/cluster/enrollment_policy.cc and the TokenReview parsing of token_review.cc: what
// a review must say for a node certificate, and that a review's answer never carries the token
// into a message.
#include "cluster/enrollment_policy.h"

#include <catch2/catch.hpp>

using rosetctl::Code;
using rosetctl::EnrollmentPolicy;
using rosetctl::SecretText;
using rosetctl::TokenReviewResult;

namespace {

TokenReviewResult node_plugin_on(const std::string& node) {
  TokenReviewResult review;
  review.authenticated = true;
  review.username = "system:serviceaccount:rosetctl:rosetctl-node";
  review.audiences = {"rosetctl.io/enroll"};
  review.extra["authentication.kubernetes.io/node-name"] = {node};
  review.extra["authentication.kubernetes.io/pod-name"] = {"rosetctl-node-x7k2p"};
  return review;
}

Code refusal(const TokenReviewResult& review, const std::string& requested = "node-a") {
  auto node = rosetctl::node_proven_by(review, EnrollmentPolicy{}, requested);
  REQUIRE_FALSE(node);
  return node.status().code();
}

}  // namespace

TEST_CASE("enrollment policy: a pod-bound token of the node plugin proves its node") {
  auto node = rosetctl::node_proven_by(node_plugin_on("node-a"), EnrollmentPolicy{}, "node-a");
  REQUIRE(node);
  CHECK(*node == "node-a");
}

TEST_CASE("enrollment policy: refusals") {
  CHECK(refusal(node_plugin_on("node-a"), "node-b") == Code::kPermissionDenied);

  TokenReviewResult unauthenticated;
  unauthenticated.error = "[invalid bearer token, service account token has expired]";
  CHECK(refusal(unauthenticated) == Code::kUnauthenticated);

  // An API server that ignored the audience (status.audiences empty): the token may be the pod's
  // default one, made for the API server.
  TokenReviewResult no_audience = node_plugin_on("node-a");
  no_audience.audiences.clear();
  CHECK(refusal(no_audience) == Code::kUnauthenticated);

  TokenReviewResult other_account = node_plugin_on("node-a");
  other_account.username = "system:serviceaccount:rosetctl:default";
  CHECK(refusal(other_account) == Code::kPermissionDenied);

  TokenReviewResult no_node = node_plugin_on("node-a");
  no_node.extra.erase("authentication.kubernetes.io/node-name");
  CHECK(refusal(no_node) == Code::kPermissionDenied);

  TokenReviewResult two_nodes = node_plugin_on("node-a");
  two_nodes.extra["authentication.kubernetes.io/node-name"] = {"node-a", "node-b"};
  CHECK(refusal(two_nodes) == Code::kPermissionDenied);

  TokenReviewResult hostile = node_plugin_on("node-a/../x");
  CHECK(refusal(hostile, "node-a/../x") == Code::kPermissionDenied);
}

TEST_CASE("token review: the answer is read from its status, the echoed token never kept") {
  SecretText token(std::string("eyJhbGciOiJSUzI1NiJ9.secret-part.sig"));
  std::string answer = R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",
    "metadata":{"creationTimestamp":null},
    "spec":{"token":"eyJhbGciOiJSUzI1NiJ9.secret-part.sig","audiences":["rosetctl.io/enroll"]},
    "status":{"authenticated":true,"audiences":["rosetctl.io/enroll"],"user":{
      "username":"system:serviceaccount:rosetctl:rosetctl-node","uid":"u-1",
      "groups":["system:serviceaccounts","system:authenticated"],
      "extra":{"authentication.kubernetes.io/node-name":["node-a"]}}}})";
  auto review = rosetctl::parse_token_review(answer, token);
  REQUIRE(review);
  CHECK(review->authenticated);
  CHECK(review->username == "system:serviceaccount:rosetctl:rosetctl-node");
  CHECK(review->extra.at("authentication.kubernetes.io/node-name") ==
        std::vector<std::string>{"node-a"});

  // A server that quotes the token in its error: scrubbed before anything holds it.
  std::string echoing = R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",
    "status":{"user":{},"error":"bad token eyJhbGciOiJSUzI1NiJ9.secret-part.sig"}})";
  auto refused = rosetctl::parse_token_review(echoing, token);
  REQUIRE(refused);
  CHECK_FALSE(refused->authenticated);
  CHECK(refused->error.find("secret-part") == std::string::npos);
  auto status = rosetctl::node_proven_by(*refused, EnrollmentPolicy{}, "node-a");
  REQUIRE_FALSE(status);
  CHECK(status.status().message().find("secret-part") == std::string::npos);

  CHECK_FALSE(rosetctl::parse_token_review(R"({"kind":"Status","code":403})", token));
  std::string body(rosetctl::token_review_body(token, "rosetctl.io/enroll").view());
  CHECK(body.find(R"("audiences":["rosetctl.io/enroll"])") != std::string::npos);
  CHECK(body.find(R"("kind":"TokenReview")") != std::string::npos);
}
