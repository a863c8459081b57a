// The node's side of enrollment (node_enrollment.h).
#include "cluster/node_enrollment.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstring>
#include <ctime>

#include "cluster/enrollment_service.h"
#include "cluster/tls_files.h"
#include "cluster/token_review.h"
#include "core/private_file.h"
#include "core/validate.h"
#include "core/x509/certificate_requests.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl {

Expected<int64_t> enroll_node(const NodeEnrollment& enrollment, std::chrono::seconds deadline) {
  // Read at every enrollment: kubelet replaces the projected token before it expires.
  auto token =
      read_bearer_token(enrollment.token_file, "the enrollment token (--enroll-token-file)");
  if (!token) return token.status();
  auto request = make_certificate_request();
  if (!request) return request.status();
  auto channel =
      grpc::CreateChannel(enrollment.address, enrollment_channel_credentials(enrollment.ca_file));
  auto stub = v1::Enrollment::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  context.AddMetadata(kEnrollmentTokenKey, std::string(token->view()));
  v1::IssueNodeCertificateRequest call;
  call.set_node_id(enrollment.node_id);
  call.set_certificate_request(request->request_pem);
  v1::IssueNodeCertificateResponse answer;
  grpc::Status status = stub->IssueNodeCertificate(&context, call, &answer);
  if (!status.ok()) {
    return Status(
        static_cast<Code>(status.error_code()),
        fmt::format("the controller's enrollment at {} issued no node certificate: {}",
                    display_quoted(enrollment.address), escape_text(status.error_message())));
  }
  // The key first: a certificate next to a key it does not belong to fails every handshake.
  ROSETCTL_RETURN_IF_ERROR(write_private_file(enrollment.key_file, request->key_pem.view()));
  ROSETCTL_RETURN_IF_ERROR(write_private_file(enrollment.certificate_file, answer.certificate()));
  return answer.not_after();
}

Expected<int64_t> enroll_node_patiently(const NodeEnrollment& enrollment,
                                        std::chrono::seconds patience) {
  auto give_up = std::chrono::steady_clock::now() + patience;
  bool told = false;
  while (true) {
    auto enrolled = enroll_node(enrollment, std::chrono::seconds(15));
    // DEADLINE_EXCEEDED too: a controller not reached in time is as unavailable as one refusing
    // the connection (gRPC's resolver waits for a nameserver that does not answer, for one).
    bool retry = !enrolled && (enrolled.status().code() == Code::kUnavailable ||
                               enrolled.status().code() == Code::kDeadlineExceeded);
    if (!retry || std::chrono::steady_clock::now() >= give_up) {
      return enrolled;
    }
    if (!told) {
      spdlog::warn("{}; trying again every 2 s for up to {} s",
                   escape_text(enrolled.status().message()), patience.count());
      told = true;
    }
    // serve blocks SIGTERM and SIGINT for its whole life (daemon/server.h): one that comes
    // while this waits ends the wait, as the default action would have ended serve.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    const struct timespec pause = {2, 0};
    if (int received = ::sigtimedwait(&stop, nullptr, &pause); received > 0) {
      return error(Code::kCancelled, "received {} while waiting to enroll node {}; stopping",
                   strsignal(received), display_quoted(enrollment.node_id));
    }
  }
}

NodeCertificateRenewal::NodeCertificateRenewal(NodeEnrollment enrollment, int64_t not_after)
    : enrollment_(std::move(enrollment)), not_after_(not_after), thread_([this] { run(); }) {}

NodeCertificateRenewal::~NodeCertificateRenewal() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void NodeCertificateRenewal::run() {
  bool failing = false;
  while (true) {
    int64_t now = ::time(nullptr);
    auto pause = failing ? std::chrono::seconds(30)
                         : std::chrono::seconds(std::max<int64_t>((not_after_ - now) / 2, 30));
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, pause, [this] { return stopping_; })) return;
    }
    auto renewed = enroll_node(enrollment_, std::chrono::seconds(15));
    if (renewed) {
      not_after_ = *renewed;
      if (failing)
        spdlog::info("renewed the node certificate of node {}",
                     display_quoted(enrollment_.node_id));
      failing = false;
    } else if (!failing) {
      spdlog::warn("cannot renew the node certificate of node {}: {}; trying again every 30 s",
                   display_quoted(enrollment_.node_id), escape_text(renewed.status().message()));
      failing = true;
    }
  }
}

}  // namespace rosetctl
