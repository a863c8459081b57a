// `serve`'s enrollment flags and their hand-over (serve_enroll.h).
#include "cli/serve_enroll.h"

#include <spdlog/spdlog.h>

#include "core/validate.h"
#include "daemon/server.h"

namespace rosetctl::cli {

void add_enroll_flags(CLI::App& serve, EnrollOptions& options) {
  const char* group = "Node certificates in Kubernetes";
  serve
      .add_option("--enroll-listen", options.listen,
                  "Controller: issue node certificates on ADDR:PORT to node plugin pods that show "
                  "a projected ServiceAccount token (TLS with --tls-cert; no client certificate "
                  "asked); needs --enroll-ca-key")
      ->type_name("ADDR:PORT")
      ->group(group);
  serve.add_option("--enroll-ca-key", options.ca_key, "Controller: the key of --tls-ca (0600)")
      ->group(group);
  serve
      .add_option("--kube-api-url", options.kube_api_url,
                  "Controller: the Kubernetes API server that reviews tokens (default: "
                  "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)")
      ->group(group);
  serve.add_option("--kube-api-ca", options.kube_api_ca, "Controller: the API server's CA")
      ->capture_default_str()
      ->group(group);
  serve
      .add_option("--kube-api-token-file", options.kube_api_token_file,
                  "Controller: its own ServiceAccount token, allowed to create tokenreviews")
      ->capture_default_str()
      ->group(group);
  serve
      .add_option("--enroll-audience", options.audience,
                  "The audience of the node plugins' projected tokens")
      ->capture_default_str()
      ->group(group);
  serve
      .add_option("--enroll-service-account", options.service_account,
                  "Controller: the only user whose tokens get node certificates")
      ->capture_default_str()
      ->group(group);
  serve
      .add_option("--enroll-hours", options.hours,
                  "Controller: how long an issued node certificate is valid")
      ->check(CLI::Range(0.01, 720.0))
      ->capture_default_str()
      ->group(group);
  serve
      .add_option("--enroll-at", options.at,
                  "Node: get this node's certificate (into --tls-cert, --tls-key) from the "
                  "controller's --enroll-listen at HOST:PORT, and renew it; needs "
                  "--enroll-token-file and --tls-ca")
      ->type_name("HOST:PORT")
      ->group(group);
  serve
      .add_option("--enroll-token-file", options.token_file,
                  "Node: the pod's projected ServiceAccount token for --enroll-audience")
      ->group(group);
  serve
      .add_option("--enroll-wait", options.wait_seconds,
                  "Node: seconds to wait for the controller at start before giving up")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str()
      ->group(group);
}

Expected<std::unique_ptr<EnrollmentServer>> start_enrollment(const EnrollOptions& options,
                                                             const GlobalOptions& globals,
                                                             const std::string& role,
                                                             AnsweringServer answering) {
  if (options.listen.empty()) {
    if (!options.ca_key.empty()) {
      return error(Code::kInvalidArgument, "--enroll-ca-key is for --enroll-listen");
    }
    return std::unique_ptr<EnrollmentServer>();
  }
  if (role == "node") {
    return error(Code::kInvalidArgument,
                 "--enroll-listen issues node certificates on a controller, not with --role node");
  }
  ROSETCTL_RETURN_IF_ERROR(check_tcp_address(options.listen, "--enroll-listen", true));
  TlsFiles tls = tls_files(globals);
  ROSETCTL_RETURN_IF_ERROR(check_tls_files(tls, "--enroll-listen"));
  if (options.ca_key.empty()) {
    return error(Code::kInvalidArgument,
                 "--enroll-listen needs --enroll-ca-key: the key of --tls-ca, which signs the "
                 "node certificates");
  }
  EnrollmentSettings settings;
  settings.review.api_url =
      options.kube_api_url.empty() ? in_cluster_api_url() : options.kube_api_url;
  if (settings.review.api_url.empty()) {
    return error(Code::kInvalidArgument,
                 "--enroll-listen needs the Kubernetes API server: --kube-api-url, or "
                 "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT as a pod has them");
  }
  if (!settings.review.api_url.starts_with("https://")) {
    return error(Code::kInvalidArgument, "--kube-api-url {} is not an https:// URL",
                 display_quoted(settings.review.api_url));
  }
  settings.review.ca_file = options.kube_api_ca;
  settings.review.credential_file = options.kube_api_token_file;
  settings.policy.audience = options.audience;
  settings.policy.service_account = options.service_account;
  settings.policy.validity = std::chrono::seconds(static_cast<int64_t>(options.hours * 3600.0));
  settings.ca_certificate_file = tls.ca;
  settings.ca_key_file = options.ca_key;
  auto server =
      EnrollmentServer::start(std::move(settings), tls, options.listen, std::move(answering));
  if (!server) return server.status();
  spdlog::info("issuing node certificates on {} (port {}) to tokens of {} for audience {}",
               display_quoted(options.listen), (*server)->port(),
               display_quoted(options.service_account), display_quoted(options.audience));
  return server;
}

Expected<std::unique_ptr<NodeCertificateRenewal>> enroll_this_node(const EnrollOptions& options,
                                                                   const GlobalOptions& globals,
                                                                   const std::string& role,
                                                                   const std::string& node_id) {
  if (options.at.empty()) {
    if (!options.token_file.empty()) {
      return error(Code::kInvalidArgument, "--enroll-token-file is for --enroll-at");
    }
    return std::unique_ptr<NodeCertificateRenewal>();
  }
  if (role != "node") {
    return error(Code::kInvalidArgument,
                 "--enroll-at gets a node plugin's certificate: it needs --role node");
  }
  ROSETCTL_RETURN_IF_ERROR(check_tcp_address(options.at, "--enroll-at", false));
  if (globals.controller.empty()) {
    return error(Code::kInvalidArgument,
                 "--enroll-at gets the certificate this node registers with: it needs --controller "
                 "(the controller's mutual-TLS address)");
  }
  if (options.token_file.empty()) {
    return error(Code::kInvalidArgument,
                 "--enroll-at needs --enroll-token-file: the pod's projected ServiceAccount "
                 "token");
  }
  if (globals.tls_cert.empty() || globals.tls_key.empty() || globals.tls_ca.empty()) {
    return error(Code::kInvalidArgument,
                 "--enroll-at needs --tls-ca (the CA to check the controller with) and "
                 "--tls-cert and --tls-key (where the certificate and key are written)");
  }
  NodeEnrollment enrollment{.address = options.at,
                            .token_file = options.token_file,
                            .ca_file = globals.tls_ca,
                            .certificate_file = globals.tls_cert,
                            .key_file = globals.tls_key,
                            .node_id = node_id};
  auto not_after = enroll_node_patiently(enrollment, std::chrono::seconds(options.wait_seconds));
  if (!not_after) return not_after.status();
  spdlog::info("node {} has its node certificate from {}, valid for {} s", display_quoted(node_id),
               display_quoted(options.at), *not_after - ::time(nullptr));
  return std::make_unique<NodeCertificateRenewal>(std::move(enrollment), *not_after);
}

}  // namespace rosetctl::cli
