// `serve`'s flags for node certificates in Kubernetes (docs/KUBERNETES.md): on the controller,
// the enrollment listener that issues them against TokenReview (cluster/enrollment_service.h);
// on a node plugin, getting one at start and renewing it (cluster/node_enrollment.h).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/global_options.h"
#include "cluster/authorization.h"
#include "cluster/enrollment_service.h"
#include "cluster/node_enrollment.h"

namespace rosetctl::cli {

struct EnrollOptions {
  // The controller's side.
  std::string listen;  // --enroll-listen ADDR:PORT; "": no enrollment served
  std::string ca_key;  // --enroll-ca-key: the key of --tls-ca
  std::string kube_api_url;
  std::string kube_api_ca = kInClusterCaFile;
  std::string kube_api_token_file = kInClusterTokenFile;
  std::string audience = kDefaultEnrollmentAudience;
  std::string service_account = kDefaultNodeServiceAccount;
  double hours = 24;
  // A node plugin's side.
  std::string at;          // --enroll-at HOST:PORT: the controller's enrollment listener
  std::string token_file;  // --enroll-token-file
  int wait_seconds = 120;
};

void add_enroll_flags(CLI::App& serve, EnrollOptions& options);

// Starts the enrollment listener when --enroll-listen is given (a controller only); null
// otherwise.
Expected<std::unique_ptr<EnrollmentServer>> start_enrollment(const EnrollOptions& options,
                                                             const GlobalOptions& globals,
                                                             const std::string& role,
                                                             AnsweringServer answering);

// With --enroll-at (a node plugin only), gets this node's certificate now, into --tls-cert and
// --tls-key, and renews it from then on; null otherwise.
Expected<std::unique_ptr<NodeCertificateRenewal>> enroll_this_node(const EnrollOptions& options,
                                                                   const GlobalOptions& globals,
                                                                   const std::string& role,
                                                                   const std::string& node_id);

}  // namespace rosetctl::cli
