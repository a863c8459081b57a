// rosetctl.v1.Enrollment on the controller: node plugins in Kubernetes get their node
// certificates here (docs/KUBERNETES.md). A node plugin pod shows a projected ServiceAccount
// token; the controller asks the API server's TokenReview whose it is
// (cluster/token_review.h), and when it is the node plugin's ServiceAccount's, bound to a pod on
// node N (cluster/enrollment_policy.h), signs the caller's certificate request as OU=node, CN=N,
// short-lived, with the CA the controller's listeners trust. With that certificate the node
// registers itself (initiator name, address) as any node does.
//
// Served by EnrollmentServer alone, on its own TLS listener that asks for no client
// certificate (tls_files.h enrollment_server_credentials), behind the same authorization
// interceptor as every server: a peer without a certificate may make this call and no other.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "cluster/authorization.h"
#include "cluster/enrollment_policy.h"
#include "cluster/tls_files.h"
#include "cluster/token_review.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

// The metadata key the token travels under: never a field, so no log line shows it.
inline constexpr const char* kEnrollmentTokenKey = "rosetctl-enrollment-token";

struct EnrollmentSettings {
  TokenReviewSettings review;
  EnrollmentPolicy policy;
  std::string ca_certificate_file;  // the CA of --tls-ca
  std::string ca_key_file;          // its key (--enroll-ca-key), mode 0600, read at each issue
};

class EnrollmentService final : public v1::Enrollment::Service {
 public:
  explicit EnrollmentService(EnrollmentSettings settings) : settings_(std::move(settings)) {}

  grpc::Status IssueNodeCertificate(grpc::ServerContext* call,
                                    const v1::IssueNodeCertificateRequest* request,
                                    v1::IssueNodeCertificateResponse* response) override;

 private:
  Status issue(const grpc::ServerContext& call, const v1::IssueNodeCertificateRequest& request,
               v1::IssueNodeCertificateResponse* response);

  const EnrollmentSettings settings_;
};

// The enrollment listener: serves until destroyed.
class EnrollmentServer {
 public:
  // Listens on `address` with the controller's certificate from `tls`. UNAVAILABLE when it
  // cannot listen there.
  static Expected<std::unique_ptr<EnrollmentServer>> start(EnrollmentSettings settings,
                                                           const TlsFiles& tls,
                                                           const std::string& address,
                                                           AnsweringServer answering);
  ~EnrollmentServer();
  int port() const { return port_; }

 private:
  explicit EnrollmentServer(EnrollmentSettings settings) : service_(std::move(settings)) {}

  EnrollmentService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace rosetctl
