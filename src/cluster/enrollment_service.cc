// Issuing node certificates against TokenReview (enrollment_service.h).
#include "cluster/enrollment_service.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "core/private_file.h"
#include "core/validate.h"
#include "core/x509/certificate_requests.h"
#include "core/x509/certificates.h"
#include "daemon/call_log.h"

namespace rosetctl {
namespace {

constexpr size_t kMaxCaFileBytes = 1 << 20;

Expected<std::string> read_ca_certificate(const std::string& path) {
  std::ifstream in(path);
  if (!in) return errno_status(errno, fmt::format("--tls-ca \"{}\" cannot be read", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

grpc::Status EnrollmentService::IssueNodeCertificate(grpc::ServerContext* call,
                                                     const v1::IssueNodeCertificateRequest* request,
                                                     v1::IssueNodeCertificateResponse* response) {
  return run_logged(*call, "IssueNodeCertificate", *request, response,
                    [&] { return issue(*call, *request, response); });
}

Status EnrollmentService::issue(const grpc::ServerContext& call,
                                const v1::IssueNodeCertificateRequest& request,
                                v1::IssueNodeCertificateResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.node_id(), "node_id"));
  auto carried = call.client_metadata().find(kEnrollmentTokenKey);
  if (carried == call.client_metadata().end() || carried->second.empty()) {
    return error(Code::kUnauthenticated,
                 "the call carries no ServiceAccount token (gRPC metadata \"{}\")",
                 kEnrollmentTokenKey);
  }
  SecretText token(std::string(carried->second.data(), carried->second.size()));
  auto review = review_token(settings_.review, token, settings_.policy.audience);
  if (!review) return review.status();
  auto node = node_proven_by(*review, settings_.policy, request.node_id());
  if (!node) {
    spdlog::warn("refused a node certificate for node {} ({}): {}",
                 display_quoted(request.node_id()), display_quoted(review->username, 200),
                 escape_text(node.status().message()));
    return node.status();
  }
  auto ca = read_ca_certificate(settings_.ca_certificate_file);
  if (!ca) return ca.status();
  auto ca_key =
      read_private_file(settings_.ca_key_file, "the CA key (--enroll-ca-key)", kMaxCaFileBytes);
  if (!ca_key) return ca_key.status();
  LeafRequest order{.role = CertificateRole::kNode, .common_name = *node};
  auto certificate =
      sign_certificate_request(request.certificate_request(), order, settings_.policy.validity, *ca,
                               SecretText(std::move(*ca_key)));
  if (!certificate) return certificate.status();
  auto facts = read_certificate_facts(*certificate, "the issued certificate");
  if (!facts) return facts.status();
  auto pod = review->extra.find(std::string(kPodNameExtra));
  spdlog::info("issued a node certificate for node {} to {}{}, valid until {}",
               display_quoted(*node), display_quoted(review->username, 200),
               pod != review->extra.end() && pod->second.size() == 1
                   ? fmt::format(" (pod {})", display_quoted(pod->second.front()))
                   : std::string(),
               facts->not_after);
  response->set_certificate(std::move(*certificate));
  response->set_not_after(facts->not_after_unix);
  return Status::ok();
}

Expected<std::unique_ptr<EnrollmentServer>> EnrollmentServer::start(EnrollmentSettings settings,
                                                                    const TlsFiles& tls,
                                                                    const std::string& address,
                                                                    AnsweringServer answering) {
  std::unique_ptr<EnrollmentServer> server(new EnrollmentServer(std::move(settings)));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, enrollment_server_credentials(tls), &server->port_);
  builder.RegisterService(&server->service_);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(authorization_interceptor(std::move(answering)));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return error(Code::kUnavailable,
                 "--enroll-listen: cannot listen on {} (address in use or not on this host)",
                 display_quoted(address));
  }
  return server;
}

EnrollmentServer::~EnrollmentServer() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
  }
}

}  // namespace rosetctl
