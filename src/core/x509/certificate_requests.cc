// Making and signing certificate requests (certificate_requests.h).
#include "core/x509/certificate_requests.h"

#include "core/x509/leaf_signing.h"
#include "core/x509/libcrypto_x509.h"
#include "core/x509/pem.h"

namespace rosetctl {
namespace {

// A request's text is a peer's: bounded before libcrypto parses it.
constexpr std::size_t kMaxRequestBytes = 16 * 1024;

}  // namespace

Expected<RequestAndKey> make_certificate_request() {
  auto api = load_libcrypto_x509();
  if (!api) return api.status();
  auto key = make_p256_key();
  if (!key) return key.status();
  X509ReqPtr request((*api)->X509_REQ_new());
  if (!request || (*api)->X509_REQ_set_version(request.get(), X509_REQ_VERSION_1) != 1 ||
      (*api)->X509_REQ_set_pubkey(request.get(), key->get()) != 1 ||
      (*api)->X509_REQ_sign(request.get(), key->get(), (*api)->EVP_sha256()) <= 0) {
    return libcrypto_error("cannot make a certificate request");
  }
  auto request_pem = request_to_pem(request.get());
  if (!request_pem) return request_pem.status();
  auto key_pem = private_key_to_pem(key->get());
  if (!key_pem) return key_pem.status();
  return RequestAndKey{std::move(*request_pem), std::move(*key_pem)};
}

Expected<std::string> sign_certificate_request(std::string_view request_pem,
                                               const LeafRequest& order,
                                               std::chrono::seconds validity,
                                               std::string_view ca_certificate_pem,
                                               const SecretText& ca_key_pem) {
  if (request_pem.size() > kMaxRequestBytes) {
    return error(Code::kInvalidArgument, "the certificate request is over {} bytes",
                 kMaxRequestBytes);
  }
  auto api = load_libcrypto_x509();
  if (!api) return api.status();
  auto request = request_from_pem(request_pem, "the certificate request");
  if (!request) return request.status();
  EVP_PKEY* key = (*api)->X509_REQ_get0_pubkey(request->get());  // owned by the request
  if (key == nullptr || (*api)->EVP_PKEY_is_a(key, "EC") != 1 ||
      (*api)->EVP_PKEY_get_bits(key) != 256) {
    (*api)->ERR_clear_error();
    return error(Code::kInvalidArgument,
                 "the certificate request's key is not an EC P-256 key (rosetctl makes one)");
  }
  if ((*api)->X509_REQ_verify(request->get(), key) != 1) {
    (*api)->ERR_clear_error();
    return error(Code::kInvalidArgument,
                 "the certificate request is not signed with its own key: no proof its sender "
                 "holds the key");
  }
  auto certificate = sign_leaf(order, validity, key, ca_certificate_pem, ca_key_pem);
  if (!certificate) return certificate.status();
  return certificate_to_pem(certificate->get());
}

}  // namespace rosetctl
