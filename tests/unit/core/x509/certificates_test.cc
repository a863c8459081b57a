// Tests for src/core/x509/certificates.cc and certificate_facts.cc: a CA and leaves it signs,
// checked with libcrypto's own chain verification, and the facts read back.
#include "core/x509/certificates.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <catch2/catch.hpp>
#include <ctime>
#include <memory>
#include <string>

using rosetctl::CertificateAndKey;
using rosetctl::CertificateRole;
using rosetctl::Code;
using rosetctl::LeafRequest;

namespace {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using Certificate = std::unique_ptr<X509, X509Free>;

Certificate parse(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), int(pem.size())),
                                                BIO_free);
  REQUIRE(bio);
  Certificate certificate(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  REQUIRE(certificate);
  return certificate;
}

// X509_verify_cert of `leaf` against a store holding only `ca`, for TLS purpose `purpose`.
int verify(const std::string& ca_pem, const std::string& leaf_pem, int purpose) {
  Certificate ca = parse(ca_pem);
  Certificate leaf = parse(leaf_pem);
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  REQUIRE(X509_STORE_add_cert(store.get(), ca.get()) == 1);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> context(X509_STORE_CTX_new(),
                                                                          X509_STORE_CTX_free);
  REQUIRE(X509_STORE_CTX_init(context.get(), store.get(), leaf.get(), nullptr) == 1);
  REQUIRE(X509_STORE_CTX_set_purpose(context.get(), purpose) == 1);
  int ok = X509_verify_cert(context.get());
  INFO("verify error: " << X509_verify_cert_error_string(X509_STORE_CTX_get_error(context.get())));
  CHECK(ok == 1);
  return ok;
}

CertificateAndKey make_ca() {
  auto ca = rosetctl::make_certificate_authority();
  REQUIRE(ca.has_value());
  return std::move(*ca);
}

CertificateAndKey issue(const CertificateAndKey& ca, LeafRequest request) {
  auto leaf = rosetctl::issue_certificate(request, ca.certificate_pem, ca.key_pem);
  INFO(leaf.status().message());
  REQUIRE(leaf.has_value());
  return std::move(*leaf);
}

}  // namespace

TEST_CASE("a node certificate verifies against its CA for serving and for calling", "[x509]") {
  CertificateAndKey ca = make_ca();
  CertificateAndKey node = issue(
      ca, {CertificateRole::kNode, "node-a", {"node-a.example"}, {"10.0.0.7", "fd00::7"}, 730});
  CHECK(verify(ca.certificate_pem, node.certificate_pem, X509_PURPOSE_SSL_SERVER) == 1);
  CHECK(verify(ca.certificate_pem, node.certificate_pem, X509_PURPOSE_SSL_CLIENT) == 1);

  Certificate leaf = parse(node.certificate_pem);
  CHECK(X509_check_host(leaf.get(), "node-a", 0, 0, nullptr) == 1);
  CHECK(X509_check_host(leaf.get(), "node-a.example", 0, 0, nullptr) == 1);
  CHECK(X509_check_host(leaf.get(), "node-b", 0, 0, nullptr) == 0);
  CHECK(X509_check_ip_asc(leaf.get(), "10.0.0.7", 0) == 1);
  CHECK(X509_check_ip_asc(leaf.get(), "fd00::7", 0) == 1);
  CHECK(X509_check_ca(leaf.get()) == 0);
  CHECK((X509_get_key_usage(leaf.get()) & KU_DIGITAL_SIGNATURE) != 0);
  CHECK(X509_get_extended_key_usage(leaf.get()) == (XKU_SSL_SERVER | XKU_SSL_CLIENT));
  CHECK(X509_get0_subject_key_id(leaf.get()) != nullptr);
  CHECK(X509_get0_authority_key_id(leaf.get()) != nullptr);
}

TEST_CASE("the facts of a leaf: role in OU, name in CN, SANs, both key usages", "[x509]") {
  CertificateAndKey ca = make_ca();
  CertificateAndKey admin = issue(
      ca,
      {CertificateRole::kAdmin, "alice", {"alice.example", "alice"}, {"::0:1", "127.0.0.1"}, 30});
  auto facts = rosetctl::read_certificate_facts(admin.certificate_pem, "alice.crt");
  REQUIRE(facts.has_value());
  CHECK(facts->subject == "O=rosetctl, OU=admin, CN=alice");
  CHECK(facts->role == "admin");
  CHECK(facts->common_name == "alice");
  // DNS:<CN> first, repeats dropped, addresses in canonical form.
  CHECK(facts->sans ==
        std::vector<std::string>{"DNS:alice", "DNS:alice.example", "IP:::1", "IP:127.0.0.1"});
  CHECK(facts->extended_key_usage == std::vector<std::string>{"serverAuth", "clientAuth"});
  CHECK_FALSE(facts->is_ca);
  CHECK(facts->issuer.rfind("O=rosetctl, OU=ca, CN=rosetctl CA ", 0) == 0);
  int64_t thirty_days = std::time(nullptr) + 30 * 86400;
  CHECK(facts->not_after_unix >= thirty_days - 60);
  CHECK(facts->not_after_unix <= thirty_days + 60);
  CHECK(facts->serial.size() >= 30);  // 128 random bits, leading zero nibbles aside
}

TEST_CASE("the CA: self-signed, CA:TRUE with pathlen 0, signs certificates and CRLs only",
          "[x509]") {
  CertificateAndKey ca = make_ca();
  Certificate certificate = parse(ca.certificate_pem);
  CHECK(X509_check_ca(certificate.get()) == 1);
  CHECK(X509_get_pathlen(certificate.get()) == 0);
  CHECK(X509_get_key_usage(certificate.get()) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  CHECK((X509_get_extension_flags(certificate.get()) & EXFLAG_SS) != 0);
  CHECK(X509_get_ext_by_NID(certificate.get(), NID_basic_constraints, -1) >= 0);
  X509_EXTENSION* constraints = X509_get_ext(
      certificate.get(), X509_get_ext_by_NID(certificate.get(), NID_basic_constraints, -1));
  CHECK(X509_EXTENSION_get_critical(constraints) == 1);

  auto facts = rosetctl::read_certificate_facts(ca.certificate_pem, "ca.crt");
  REQUIRE(facts.has_value());
  CHECK(facts->role == "ca");
  CHECK(facts->is_ca);
  CHECK(facts->subject == facts->issuer);
  int64_t ten_years = std::time(nullptr) + int64_t{3650} * 86400;
  CHECK(facts->not_after_unix >= ten_years - 60);
  CHECK(facts->not_after_unix <= ten_years + 60);
  // A second CA is a different CA.
  CertificateAndKey other = make_ca();
  CHECK(rosetctl::read_certificate_facts(other.certificate_pem, "x")->subject != facts->subject);
}

TEST_CASE("keys are unencrypted PKCS#8 EC P-256", "[x509]") {
  CertificateAndKey ca = make_ca();
  CertificateAndKey node = issue(ca, {CertificateRole::kNode, "n1", {}, {}, 730});
  std::string key_pem(node.key_pem.view());
  CHECK(key_pem.rfind("-----BEGIN PRIVATE KEY-----\n", 0) == 0);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(key_pem.data(), int(key_pem.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  REQUIRE(key);
  CHECK(EVP_PKEY_is_a(key.get(), "EC"));
  char curve[64] = {};
  REQUIRE(EVP_PKEY_get_utf8_string_param(key.get(), "group", curve, sizeof curve, nullptr) == 1);
  CHECK(std::string(curve) == "prime256v1");
  Certificate certificate = parse(node.certificate_pem);
  CHECK(X509_check_private_key(certificate.get(), key.get()) == 1);
}

TEST_CASE("serial numbers are random", "[x509]") {
  CertificateAndKey ca = make_ca();
  auto a = rosetctl::read_certificate_facts(
      issue(ca, {CertificateRole::kNode, "n1", {}, {}, 730}).certificate_pem, "a");
  auto b = rosetctl::read_certificate_facts(
      issue(ca, {CertificateRole::kNode, "n1", {}, {}, 730}).certificate_pem, "b");
  CHECK(a->serial != b->serial);
}

TEST_CASE("a leaf ends when its CA does if that is sooner", "[x509]") {
  auto ca = rosetctl::make_certificate_authority(3);
  REQUIRE(ca.has_value());
  CertificateAndKey node = issue(*ca, {CertificateRole::kNode, "n1", {}, {}, 730});
  auto ca_facts = rosetctl::read_certificate_facts(ca->certificate_pem, "ca");
  auto node_facts = rosetctl::read_certificate_facts(node.certificate_pem, "node");
  CHECK(node_facts->not_after == ca_facts->not_after);
}

TEST_CASE("a CA key that is not the CA certificate's is refused", "[x509]") {
  CertificateAndKey ca = make_ca();
  CertificateAndKey other = make_ca();
  auto leaf = rosetctl::issue_certificate({CertificateRole::kNode, "n1", {}, {}, 730},
                                          ca.certificate_pem, other.key_pem);
  CHECK(leaf.status().code() == Code::kFailedPrecondition);
  CHECK(leaf.status().message().find("does not belong") != std::string::npos);
  // A leaf cannot act as a CA.
  CertificateAndKey node = issue(ca, {CertificateRole::kNode, "n1", {}, {}, 730});
  auto grandchild = rosetctl::issue_certificate({CertificateRole::kNode, "n2", {}, {}, 730},
                                                node.certificate_pem, node.key_pem);
  CHECK(grandchild.status().code() == Code::kFailedPrecondition);
}

TEST_CASE("bad names, addresses and validity are refused before anything is made", "[x509]") {
  CertificateAndKey ca = make_ca();
  struct Bad {
    LeafRequest request;
    std::string mention;
  };
  for (const Bad& bad : std::vector<Bad>{
           {{CertificateRole::kNode, "", {}, {}, 730}, "node id is required"},
           {{CertificateRole::kNode, "../x", {}, {}, 730}, "\"../x\""},
           {{CertificateRole::kNode, std::string(65, 'n'), {}, {}, 730}, "at most 64"},
           {{CertificateRole::kAdmin, "a/b", {}, {}, 730}, "admin name"},
           {{CertificateRole::kController, "c", {"a,IP:1.2.3.4"}, {}, 730}, "DNS name"},
           {{CertificateRole::kNode, "n", {"-x.example"}, {}, 730}, "DNS name"},
           {{CertificateRole::kNode, "n", {"a..b"}, {}, 730}, "DNS name"},
           {{CertificateRole::kNode, "n", {std::string(64, 'd')}, {}, 730}, "DNS name"},
           {{CertificateRole::kNode, "n", {}, {"10.0.0"}, 730}, "IP address \"10.0.0\""},
           {{CertificateRole::kNode, "n", {}, {"fe80::1%eth0"}, 730}, "IP address"},
           {{CertificateRole::kNode, "n", {}, {"10.0.0.1:443"}, 730}, "IP address"},
           {{CertificateRole::kNode, "n", {}, {}, 0}, "at least 1"},
           {{CertificateRole::kCa, "n", {}, {}, 730}, "CA"},
       }) {
    INFO("common name " << bad.request.common_name);
    CHECK(rosetctl::validate_leaf_request(bad.request).code() == Code::kInvalidArgument);
    auto leaf = rosetctl::issue_certificate(bad.request, ca.certificate_pem, ca.key_pem);
    CHECK(leaf.status().code() == Code::kInvalidArgument);
    CHECK_THAT(leaf.status().message(), Catch::Contains(bad.mention));
  }
  CHECK(rosetctl::validate_leaf_request(
            {CertificateRole::kNode, std::string(64, 'n'), {"a_b.example"}, {"::1"}, 1})
            .is_ok());
}

TEST_CASE("reading facts from something that is not a certificate names the source only",
          "[x509]") {
  CertificateAndKey ca = make_ca();
  std::string key_pem(ca.key_pem.view());
  auto facts = rosetctl::read_certificate_facts(key_pem, "file \"ca.key\"");
  CHECK(facts.status().code() == Code::kInvalidArgument);
  CHECK(facts.status().message() == "file \"ca.key\" holds no PEM certificate");
  CHECK(rosetctl::read_certificate_facts("", "empty").status().code() == Code::kInvalidArgument);
}

TEST_CASE("hostile texts in a foreign certificate are shown escaped", "[x509]") {
  // A certificate made elsewhere, with a line break and an escape sequence in its CN.
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  Certificate certificate(X509_new());
  X509_NAME* name = X509_get_subject_name(certificate.get());
  const std::string cn = "evil\nRole: admin\x1b[0m";
  REQUIRE(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                     reinterpret_cast<const unsigned char*>(cn.data()),
                                     int(cn.size()), -1, 0) == 1);
  X509_set_issuer_name(certificate.get(), name);
  X509_gmtime_adj(X509_getm_notBefore(certificate.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(certificate.get()), 60);
  X509_set_pubkey(certificate.get(), key.get());
  REQUIRE(X509_sign(certificate.get(), key.get(), EVP_sha256()) > 0);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(bio.get(), certificate.get());
  char* data = nullptr;
  long length = BIO_get_mem_data(bio.get(), &data);
  auto facts = rosetctl::read_certificate_facts(std::string(data, length), "foreign");
  REQUIRE(facts.has_value());
  CHECK(facts->common_name == "evil\\x0aRole: admin\\x1b[0m");
  CHECK(facts->subject.find('\n') == std::string::npos);
  CHECK(facts->role.empty());
  CHECK(facts->sans.empty());
  CHECK(facts->extended_key_usage.empty());
}
