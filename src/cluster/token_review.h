// Asking the Kubernetes API server who a ServiceAccount token belongs to: the TokenReview API
// (POST /apis/authentication.k8s.io/v1/tokenreviews), with the controller's own in-cluster
// credentials. Used by the enrollment of node plugins (cluster/enrollment_service.h); what a
// review must say to earn a certificate is cluster/enrollment_policy.h's.
//
// Tokens are secrets: they travel in the request body and the Authorization header only, are
// never logged, and never appear in a message (the API server echoes the reviewed token in its
// answer's spec, which is never read; its status.error has the token scrubbed).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/x509/secret_text.h"

namespace rosetctl {

// Where a pod finds its ServiceAccount's credentials (kubelet's kube-api-access volume).
inline constexpr const char* kInClusterCaFile =
    "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
inline constexpr const char* kInClusterTokenFile =
    "/var/run/secrets/kubernetes.io/serviceaccount/token";

struct TokenReviewSettings {
  std::string api_url;          // "https://10.96.0.1:443": the API server, no path
  std::string ca_file;          // the CA its certificate verifies against
  std::string credential_file;  // the controller's own bearer token, read at every review
                                // (kubelet replaces it before it expires)
  std::chrono::milliseconds timeout{10'000};
};

// https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, as every pod's environment has them;
// "" outside a cluster.
std::string in_cluster_api_url();

// The review's status, as the API server answered it.
struct TokenReviewResult {
  bool authenticated = false;
  std::string error;  // status.error (the token scrubbed from it)
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
  std::vector<std::string> audiences;  // status.audiences
};

// Reviews `token` for `audience`. UNAVAILABLE when the API server cannot be reached or refuses
// the controller (HTTP 401: its credentials; 403: RBAC lacks `create tokenreviews`), naming
// which; INTERNAL for an answer that is no TokenReview.
Expected<TokenReviewResult> review_token(const TokenReviewSettings& settings,
                                         const SecretText& token, std::string_view audience);

// A bearer token file (a projected ServiceAccount token: kubelet's symlinks are followed): its
// text without surrounding white space. A regular file of at most 64 KiB; the content never
// appears in a message. `what` names it in errors.
Expected<SecretText> read_bearer_token(const std::string& path, std::string_view what);

// The TokenReview request body for `token` (JSON).
SecretText token_review_body(const SecretText& token, std::string_view audience);

// The status of a TokenReview answer's JSON text. INTERNAL naming what is missing; `token` is
// scrubbed from status.error.
Expected<TokenReviewResult> parse_token_review(std::string_view body, const SecretText& token);

}  // namespace rosetctl
