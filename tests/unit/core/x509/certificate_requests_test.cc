// Tests for src/core/x509/certificate_requests.cc: a node's request signed by the CA names the
// node the signer chose whatever its subject says, holds the requester's key, verifies with the
// CA, and a request whose signature is not its key's is refused.
#include "core/x509/certificate_requests.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>

using rosetctl::CertificateRole;
using rosetctl::Code;
using rosetctl::LeafRequest;

namespace {

template <typename T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
using Certificate = std::unique_ptr<X509, Freer<X509, X509_free>>;
using Key = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using Request = std::unique_ptr<X509_REQ, Freer<X509_REQ, X509_REQ_free>>;

std::unique_ptr<BIO, decltype(&BIO_free)> reading(const std::string& pem) {
  return {BIO_new_mem_buf(pem.data(), int(pem.size())), BIO_free};
}

Certificate certificate_of(const std::string& pem) {
  Certificate c(PEM_read_bio_X509(reading(pem).get(), nullptr, nullptr, nullptr));
  REQUIRE(c);
  return c;
}

std::string name_entry(X509* c, int nid) {
  char text[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(c), nid, text, sizeof text);
  return text;
}

std::string to_pem(X509_REQ* request) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_X509_REQ(bio.get(), request) == 1);
  char* data = nullptr;
  long length = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(length));
}

// A request with subject CN=`cn` for `key`, signed with `signer`.
std::string crafted_request(EVP_PKEY* key, EVP_PKEY* signer, const char* cn) {
  Request request(X509_REQ_new());
  X509_REQ_set_version(request.get(), 0);
  X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(request.get()), "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_REQ_set_pubkey(request.get(), key);
  REQUIRE(X509_REQ_sign(request.get(), signer, EVP_sha256()) > 0);
  return to_pem(request.get());
}

const LeafRequest kNodeA{.role = CertificateRole::kNode, .common_name = "node-a"};

}  // namespace

TEST_CASE("certificate requests: the CA signs the requester's key for the name it chose") {
  auto ca = rosetctl::make_certificate_authority();
  REQUIRE(ca);
  auto request = rosetctl::make_certificate_request();
  REQUIRE(request);
  CHECK(request->request_pem.find("BEGIN CERTIFICATE REQUEST") != std::string::npos);
  auto signed_pem = rosetctl::sign_certificate_request(
      request->request_pem, kNodeA, std::chrono::hours(24), ca->certificate_pem, ca->key_pem);
  REQUIRE(signed_pem);
  Certificate leaf = certificate_of(*signed_pem);
  CHECK(name_entry(leaf.get(), NID_commonName) == "node-a");
  CHECK(name_entry(leaf.get(), NID_organizationalUnitName) == "node");
  // Its key is the requester's: the certificate and the private key belong together.
  std::string key_text(request->key_pem.view());
  Key key(PEM_read_bio_PrivateKey(reading(key_text).get(), nullptr, nullptr, nullptr));
  REQUIRE(key);
  CHECK(X509_check_private_key(leaf.get(), key.get()) == 1);
  // Valid for the time asked (24 h, from 5 minutes ago), not the 730 days of `tls issue`.
  int days = 0, seconds = 0;
  REQUIRE(ASN1_TIME_diff(&days, &seconds, X509_get0_notBefore(leaf.get()),
                         X509_get0_notAfter(leaf.get())) == 1);
  CHECK(days * 86400 + seconds == 24 * 3600 + 5 * 60);
}

TEST_CASE("certificate requests: the request's own subject is never the certificate's") {
  auto ca = rosetctl::make_certificate_authority();
  REQUIRE(ca);
  Key key(EVP_EC_gen("P-256"));
  REQUIRE(key);
  std::string claiming_b = crafted_request(key.get(), key.get(), "node-b");
  auto signed_pem = rosetctl::sign_certificate_request(claiming_b, kNodeA, std::chrono::hours(1),
                                                       ca->certificate_pem, ca->key_pem);
  REQUIRE(signed_pem);
  CHECK(name_entry(certificate_of(*signed_pem).get(), NID_commonName) == "node-a");
}

TEST_CASE("certificate requests: refused without proof of the key, or for another key type") {
  auto ca = rosetctl::make_certificate_authority();
  REQUIRE(ca);
  Key victim(EVP_EC_gen("P-256"));
  Key attacker(EVP_EC_gen("P-256"));
  // Someone else's public key, signed by the attacker: no proof the sender holds that key.
  std::string not_own = crafted_request(victim.get(), attacker.get(), "x");
  auto refused = rosetctl::sign_certificate_request(not_own, kNodeA, std::chrono::hours(1),
                                                    ca->certificate_pem, ca->key_pem);
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == Code::kInvalidArgument);
  CHECK(refused.status().message().find("not signed with its own key") != std::string::npos);

  Key rsa(EVP_RSA_gen(2048));
  std::string rsa_request = crafted_request(rsa.get(), rsa.get(), "x");
  auto wrong_type = rosetctl::sign_certificate_request(rsa_request, kNodeA, std::chrono::hours(1),
                                                       ca->certificate_pem, ca->key_pem);
  REQUIRE_FALSE(wrong_type);
  CHECK(wrong_type.status().message().find("EC P-256") != std::string::npos);

  auto garbage = rosetctl::sign_certificate_request("not a request", kNodeA, std::chrono::hours(1),
                                                    ca->certificate_pem, ca->key_pem);
  REQUIRE_FALSE(garbage);
  CHECK(garbage.status().code() == Code::kInvalidArgument);
}
