// Making keys, the CA and leaf certificates (the facts of one are read in certificate_facts.cc).
#include "core/x509/certificates.h"

#include <arpa/inet.h>

#include <algorithm>
#include <ctime>

#include "core/random_id.h"
#include "core/validate.h"
#include "core/x509/leaf_signing.h"
#include "core/x509/libcrypto_x509.h"
#include "core/x509/pem.h"

namespace rosetctl {
namespace {

constexpr const char* kCertificateOrganization = "rosetctl";
// Other hosts' clocks may lag this one's; a certificate must be usable as soon as it is copied.
constexpr long kCertificateBackdateSeconds = 5 * 60;
constexpr int64_t kCertificateSecondsPerDay = 24 * 60 * 60;

bool is_dns_label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

Status add_subject_entry(X509_NAME* name, const char* field, std::string_view value) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(value.data());
  if (libcrypto_x509().X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, bytes,
                                                  static_cast<int>(value.size()), -1, 0) != 1) {
    return libcrypto_error(fmt::format("cannot set the certificate's {}", field));
  }
  return Status::ok();
}

// One extension from OpenSSL's configuration syntax. Every value is a constant of ours or made
// of validated names and canonical addresses, which cannot contain the syntax's ',' or ':'.
Status add_extension(X509* certificate, X509V3_CTX* context, int nid, const std::string& value) {
  const LibcryptoX509& api = libcrypto_x509();
  X509ExtensionPtr extension(api.X509V3_EXT_conf_nid(nullptr, context, nid, value.c_str()));
  if (!extension || api.X509_add_ext(certificate, extension.get(), -1) != 1) {
    return libcrypto_error(fmt::format("cannot add the {} extension", api.OBJ_nid2sn(nid)));
  }
  return Status::ok();
}

}  // namespace

Expected<EvpPkeyPtr> make_p256_key() {
  // EVP_EC_gen is a macro for this call; the curve travels as a char* through the varargs.
  EvpPkeyPtr key(
      libcrypto_x509().EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", const_cast<char*>("P-256")));
  if (!key) return libcrypto_error("cannot make an EC P-256 key");
  return key;
}

namespace {

// Version 3, a random 128-bit serial, the validity, the key and the subject; no issuer,
// extensions or signature yet.
Expected<X509Ptr> new_certificate(EVP_PKEY* key, CertificateRole role, std::string_view common_name,
                                  time_t not_after) {
  const LibcryptoX509& api = libcrypto_x509();
  X509Ptr certificate(api.X509_new());
  BignumPtr serial(api.BN_new());
  if (!certificate || !serial || api.X509_set_version(certificate.get(), X509_VERSION_3) != 1 ||
      api.BN_rand(serial.get(), 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      api.BN_to_ASN1_INTEGER(serial.get(), api.X509_get_serialNumber(certificate.get())) ==
          nullptr ||
      api.X509_time_adj_ex(api.X509_getm_notBefore(certificate.get()), 0,
                           -kCertificateBackdateSeconds, nullptr) == nullptr ||
      api.X509_time_adj_ex(api.X509_getm_notAfter(certificate.get()), 0, 0, &not_after) ==
          nullptr ||
      api.X509_set_pubkey(certificate.get(), key) != 1) {
    return libcrypto_error("cannot fill in a certificate");
  }
  X509_NAME* subject = api.X509_get_subject_name(certificate.get());  // owned by the certificate
  ROSETCTL_RETURN_IF_ERROR(add_subject_entry(subject, "O", kCertificateOrganization));
  ROSETCTL_RETURN_IF_ERROR(add_subject_entry(subject, "OU", role_name(role)));
  ROSETCTL_RETURN_IF_ERROR(add_subject_entry(subject, "CN", common_name));
  return certificate;
}

Expected<CertificateAndKey> signed_result(X509* certificate, EVP_PKEY* signing_key,
                                          EVP_PKEY* own_key) {
  const LibcryptoX509& api = libcrypto_x509();
  if (api.X509_sign(certificate, signing_key, api.EVP_sha256()) <= 0) {
    return libcrypto_error("cannot sign the certificate");
  }
  auto certificate_pem = certificate_to_pem(certificate);
  if (!certificate_pem) return certificate_pem.status();
  auto key_pem = private_key_to_pem(own_key);
  if (!key_pem) return key_pem.status();
  return CertificateAndKey{std::move(*certificate_pem), std::move(*key_pem)};
}

// "DNS:<common name>,DNS:...,IP:..." without repeats, validating what the caller gave.
Expected<std::string> subject_alt_names(const LeafRequest& request) {
  std::vector<std::string> names = {"DNS:" + request.common_name};
  auto add = [&names](std::string name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const std::string& dns : request.dns_names) {
    ROSETCTL_RETURN_IF_ERROR(validate_dns_name(dns));
    add("DNS:" + dns);
  }
  for (const std::string& ip : request.ip_addresses) {
    auto canonical = canonical_ip_address(ip);
    if (!canonical) return canonical.status();
    add("IP:" + *canonical);
  }
  std::string joined;
  for (const std::string& name : names)
    joined += (joined.empty() ? "" : ",") + name;
  return joined;
}

Status check_validity_days(int days) {
  if (days < 1) return error(Code::kInvalidArgument, "validity of {} days: at least 1", days);
  return Status::ok();
}

}  // namespace

std::string_view role_name(CertificateRole role) {
  switch (role) {
    case CertificateRole::kCa:
      return "ca";
    case CertificateRole::kController:
      return "controller";
    case CertificateRole::kNode:
      return "node";
    case CertificateRole::kAdmin:
      return "admin";
  }
  return "unknown";
}

Status validate_dns_name(std::string_view value) {
  if (value.empty()) return error(Code::kInvalidArgument, "a DNS name may not be empty");
  if (value.size() > 253) {
    return error(Code::kInvalidArgument, "DNS name {} is {} bytes long; the limit is 253",
                 display_quoted(value), value.size());
  }
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t end = std::min(value.find('.', start), value.size());
    std::string_view label = value.substr(start, end - start);
    bool ok = !label.empty() && label.size() <= 63 && label.front() != '-' && label.back() != '-' &&
              std::all_of(label.begin(), label.end(), is_dns_label_char);
    if (!ok) {
      return error(Code::kInvalidArgument,
                   "DNS name {} must be dot-separated labels of 1-63 letters, digits, '-' and "
                   "'_', none starting or ending with '-'",
                   display_quoted(value));
    }
    start = end + 1;
  }
  return Status::ok();
}

Expected<std::string> canonical_ip_address(std::string_view text) {
  std::string copy(text);
  unsigned char address[16];
  char canonical[INET6_ADDRSTRLEN];
  for (int family : {AF_INET, AF_INET6}) {
    if (copy.find('\0') == std::string::npos && ::inet_pton(family, copy.c_str(), address) == 1 &&
        ::inet_ntop(family, address, canonical, sizeof canonical) != nullptr) {
      return std::string(canonical);
    }
  }
  return error(Code::kInvalidArgument, "IP address {} is neither IPv4 nor IPv6 (no zone, no port)",
               display_quoted(text));
}

Status validate_common_name(CertificateRole role, std::string_view name) {
  std::string_view what;
  switch (role) {
    case CertificateRole::kNode:
      what = "node id";
      ROSETCTL_RETURN_IF_ERROR(validate_node_id(name, what));
      break;
    case CertificateRole::kController:
      what = "controller name";
      ROSETCTL_RETURN_IF_ERROR(validate_node_id(name, what));
      break;
    case CertificateRole::kAdmin:
      what = "admin name";
      ROSETCTL_RETURN_IF_ERROR(validate_name(name, what));
      break;
    case CertificateRole::kCa:
      return error(Code::kInvalidArgument, "a CA's name is chosen by rosetctl");
  }
  if (name.size() > kMaxCommonNameBytes) {
    return error(Code::kInvalidArgument,
                 "{} {} is {} bytes long; a certificate's common name holds at most {}", what,
                 display_quoted(name), name.size(), kMaxCommonNameBytes);
  }
  return Status::ok();
}

Status validate_leaf_request(const LeafRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(validate_common_name(request.role, request.common_name));
  ROSETCTL_RETURN_IF_ERROR(check_validity_days(request.days));
  return subject_alt_names(request).status();
}

Expected<CertificateAndKey> make_certificate_authority(int days) {
  ROSETCTL_RETURN_IF_ERROR(check_validity_days(days));
  auto api = load_libcrypto_x509();
  if (!api) return api.status();
  auto key = make_p256_key();
  if (!key) return key.status();
  // The random part tells CAs apart in trust stores and in `tls show`'s issuer line.
  time_t not_after = ::time(nullptr) + days * kCertificateSecondsPerDay;
  auto certificate =
      new_certificate(key->get(), CertificateRole::kCa, "rosetctl CA " + random_hex(8), not_after);
  if (!certificate) return certificate.status();
  X509* ca = certificate->get();
  if ((*api)->X509_set_issuer_name(ca, (*api)->X509_get_subject_name(ca)) != 1) {
    return libcrypto_error("cannot set the CA's issuer");
  }
  X509V3_CTX context = {};
  (*api)->X509V3_set_ctx(&context, ca, ca, nullptr, nullptr, 0);
  // The subject key identifier first: the authority key identifier is copied from it.
  ROSETCTL_RETURN_IF_ERROR(
      add_extension(ca, &context, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  ROSETCTL_RETURN_IF_ERROR(
      add_extension(ca, &context, NID_key_usage, "critical,keyCertSign,cRLSign"));
  ROSETCTL_RETURN_IF_ERROR(add_extension(ca, &context, NID_subject_key_identifier, "hash"));
  ROSETCTL_RETURN_IF_ERROR(
      add_extension(ca, &context, NID_authority_key_identifier, "keyid:always"));
  return signed_result(ca, key->get(), key->get());
}

Expected<X509Ptr> sign_leaf(const LeafRequest& request, std::chrono::seconds validity,
                            EVP_PKEY* subject_key, std::string_view ca_certificate_pem,
                            const SecretText& ca_key_pem) {
  ROSETCTL_RETURN_IF_ERROR(validate_common_name(request.role, request.common_name));
  if (validity.count() < 60) {
    return error(Code::kInvalidArgument, "validity of {} s: at least 60", validity.count());
  }
  auto alt_names = subject_alt_names(request);
  if (!alt_names) return alt_names.status();
  auto api = load_libcrypto_x509();
  if (!api) return api.status();

  auto ca = certificate_from_pem(ca_certificate_pem, "the CA certificate");
  if (!ca) return ca.status();
  auto ca_key = private_key_from_pem(ca_key_pem, "the CA key");
  if (!ca_key) return ca_key.status();
  if ((*api)->X509_check_ca(ca->get()) != 1) {
    return error(Code::kFailedPrecondition, "the CA certificate is not a CA (no CA:TRUE)");
  }
  if ((*api)->X509_check_private_key(ca->get(), ca_key->get()) != 1) {
    (*api)->ERR_clear_error();
    return error(Code::kFailedPrecondition, "the CA key does not belong to the CA certificate");
  }
  auto ca_not_after = unix_time_of((*api)->X509_get0_notAfter(ca->get()));
  if (!ca_not_after) return ca_not_after.status();
  time_t now = ::time(nullptr);
  if (*ca_not_after <= now) {
    return error(Code::kFailedPrecondition, "the CA certificate has expired");
  }
  // A certificate that outlives its CA would stop verifying with it anyway; say so in its dates.
  time_t not_after = std::min<int64_t>(now + validity.count(), *ca_not_after);

  auto certificate = new_certificate(subject_key, request.role, request.common_name, not_after);
  if (!certificate) return certificate.status();
  X509* leaf = certificate->get();
  if ((*api)->X509_set_issuer_name(leaf, (*api)->X509_get_subject_name(ca->get())) != 1) {
    return libcrypto_error("cannot set the certificate's issuer");
  }
  X509V3_CTX context = {};
  (*api)->X509V3_set_ctx(&context, ca->get(), leaf, nullptr, nullptr, 0);
  ROSETCTL_RETURN_IF_ERROR(
      add_extension(leaf, &context, NID_basic_constraints, "critical,CA:FALSE"));
  ROSETCTL_RETURN_IF_ERROR(
      add_extension(leaf, &context, NID_key_usage, "critical,digitalSignature"));
  // Both: a node listens for the controller and calls it; the controller does the same to nodes.
  ROSETCTL_RETURN_IF_ERROR(
      add_extension(leaf, &context, NID_ext_key_usage, "serverAuth,clientAuth"));
  ROSETCTL_RETURN_IF_ERROR(add_extension(leaf, &context, NID_subject_key_identifier, "hash"));
  ROSETCTL_RETURN_IF_ERROR(
      add_extension(leaf, &context, NID_authority_key_identifier, "keyid:always"));
  ROSETCTL_RETURN_IF_ERROR(add_extension(leaf, &context, NID_subject_alt_name, *alt_names));
  if ((*api)->X509_sign(leaf, ca_key->get(), (*api)->EVP_sha256()) <= 0) {
    return libcrypto_error("cannot sign the certificate");
  }
  return certificate;
}

Expected<CertificateAndKey> issue_certificate(const LeafRequest& request,
                                              std::string_view ca_certificate_pem,
                                              const SecretText& ca_key_pem) {
  ROSETCTL_RETURN_IF_ERROR(validate_common_name(request.role, request.common_name));
  ROSETCTL_RETURN_IF_ERROR(check_validity_days(request.days));
  ROSETCTL_RETURN_IF_ERROR(subject_alt_names(request).status());
  auto api = load_libcrypto_x509();
  if (!api) return api.status();
  auto key = make_p256_key();
  if (!key) return key.status();
  auto certificate =
      sign_leaf(request, std::chrono::seconds(int64_t{request.days} * kCertificateSecondsPerDay),
                key->get(), ca_certificate_pem, ca_key_pem);
  if (!certificate) return certificate.status();
  auto certificate_pem = certificate_to_pem(certificate->get());
  if (!certificate_pem) return certificate_pem.status();
  auto key_pem = private_key_to_pem(key->get());
  if (!key_pem) return key_pem.status();
  return CertificateAndKey{std::move(*certificate_pem), std::move(*key_pem)};
}

}  // namespace rosetctl
