// TLS credentials for gRPC from certificate files, reloaded as the files change.
#include "cluster/tls_files.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "cluster/peer_authority.h"
#include "core/private_file.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

Status check_certificate_file(const std::string& path, std::string_view flag,
                              std::string_view purpose) {
  if (path.empty()) {
    return error(Code::kInvalidArgument,
                 "{} needs {} (rosetctl tls init / tls issue make the files)", purpose, flag);
  }
  std::ifstream in(path);
  if (!in) {
    return errno_status(errno, fmt::format("{} \"{}\" cannot be read", flag, path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxPemBytes ||
      text.str().find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return error(Code::kInvalidArgument, "{} \"{}\" holds no PEM certificate", flag, path);
  }
  return Status::ok();
}

std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_of(
    const TlsFiles& files) {
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.certificate, files.ca, kTlsReloadSeconds);
}

}  // namespace

Status check_tls_files(const TlsFiles& files, std::string_view purpose) {
  ROSETCTL_RETURN_IF_ERROR(check_certificate_file(files.certificate, "--tls-cert", purpose));
  ROSETCTL_RETURN_IF_ERROR(check_certificate_file(files.ca, "--tls-ca", purpose));
  if (files.key.empty()) {
    return error(Code::kInvalidArgument,
                 "{} needs --tls-key (rosetctl tls init / tls issue make the files)", purpose);
  }
  auto key = read_private_file(files.key, "the TLS key file (--tls-key)", kMaxPemBytes);
  if (!key) return key.status();
  if (key->find("PRIVATE KEY-----") == std::string::npos) {
    return error(Code::kInvalidArgument, "--tls-key \"{}\" holds no PEM private key", files.key);
  }
  return Status::ok();
}

std::shared_ptr<grpc::ServerCredentials> server_credentials(const TlsFiles& files) {
  grpc::experimental::TlsServerCredentialsOptions options(provider_of(files));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ServerCredentials> enrollment_server_credentials(const TlsFiles& files) {
  grpc::experimental::TlsServerCredentialsOptions options(provider_of(files));
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const TlsFiles& files) {
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider_of(files));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

namespace {

// The check of peer_channel_credentials: after the chain (verified by gRPC against the CA) and
// the host name (as gRPC's default verifier checks it), the subject's role and name.
class PeerIdentityVerifier final : public grpc::experimental::ExternalCertificateVerifier {
 public:
  PeerIdentityVerifier(std::string role, std::string name)
      : role_(std::move(role)), name_(std::move(name)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> /*callback*/, grpc::Status* sync_status) override {
    grpc::Status host;
    host_name_.Verify(
        request, [](grpc::Status) {}, &host);  // synchronous
    if (!host.ok()) {
      *sync_status = host;
      return true;
    }
    Peer peer = peer_from_certificate(
        std::string_view(request->peer_cert().data(), request->peer_cert().size()));
    bool role_matches = (role_ == "node" && peer.role == PeerRole::kNode) ||
                        (role_ == "controller" && peer.role == PeerRole::kController);
    if (role_matches && (name_.empty() || peer.name == name_)) {
      *sync_status = grpc::Status::OK;
      return true;
    }
    std::string wanted = name_.empty()
                             ? fmt::format("a {} certificate", role_)
                             : fmt::format("{} certificate {}", role_, display_quoted(name_));
    std::string message =
        fmt::format("{} answered at {}, where {} was expected", peer.describe(),
                    display_quoted(std::string_view(request->target_name().data(),
                                                    request->target_name().size())),
                    wanted);
    spdlog::error("refused a TLS peer: {}", message);
    *sync_status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, message);
    return true;
  }

  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest* /*request*/) override {}

 private:
  const std::string role_;
  const std::string name_;
  grpc::experimental::HostNameCertificateVerifier host_name_;
};

}  // namespace

std::shared_ptr<grpc::ChannelCredentials> peer_channel_credentials(const TlsFiles& files,
                                                                   std::string role,
                                                                   std::string name) {
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider_of(files));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<PeerIdentityVerifier>(
          std::move(role), std::move(name)));
  return grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> enrollment_channel_credentials(
    const std::string& ca_file) {
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(ca_file,
                                                                           kTlsReloadSeconds));
  options.watch_root_certs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<PeerIdentityVerifier>("controller",
                                                                                    ""));
  return grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::Channel> kept_channel(const std::string& address,
                                            const std::shared_ptr<grpc::ChannelCredentials>& tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kReconnectBackoffMs / 5);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kReconnectBackoffMs / 5);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kReconnectBackoffMs);
  return grpc::CreateCustomChannel(address, tls, args);
}

}  // namespace rosetctl
