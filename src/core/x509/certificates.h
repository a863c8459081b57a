// Certificates for rosetctl's mutual TLS (README: Certificates): EC P-256 keys, a CA, leaf
// certificates it signs, and the facts of a certificate read back. Roles travel in the subject's
// OU (`O=rosetctl, OU=<role>, CN=<name>`), which is what serve's authorization reads. Everything
// is PEM text in memory; core/x509/certificate_directory.h puts it in files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/x509/secret_text.h"

namespace rosetctl {

enum class CertificateRole { kCa, kController, kNode, kAdmin };

// The OU text of a role: "ca", "controller", "node", "admin".
std::string_view role_name(CertificateRole role);

inline constexpr int kCaValidityDays = 3650;
inline constexpr int kDefaultLeafValidityDays = 730;
// X.509's upper bound for a common name (RFC 5280 ub-common-name); libcrypto enforces it.
inline constexpr std::size_t kMaxCommonNameBytes = 64;

// A certificate and its private key (PKCS#8 PEM, unencrypted).
struct CertificateAndKey {
  std::string certificate_pem;
  SecretText key_pem;
};

// A leaf certificate to issue. `common_name` must pass the role's rules (a node id for nodes
// and the controller, a name for admins, and at most 64 bytes). Subject alternative names are
// DNS:<common_name>, then every DNS name and IP address given (IPv4 or IPv6 text), without
// repeats.
struct LeafRequest {
  CertificateRole role = CertificateRole::kNode;
  std::string common_name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  int days = kDefaultLeafValidityDays;
};

// INVALID_ARGUMENT naming `value` unless it is a DNS name (1-253 bytes, dot-separated labels of
// 1-63 letters, digits, '-' and '_', none starting or ending with '-').
Status validate_dns_name(std::string_view value);

// `text` as an IP address in canonical form ("::1", "10.0.0.1"); INVALID_ARGUMENT otherwise.
Expected<std::string> canonical_ip_address(std::string_view text);

// INVALID_ARGUMENT unless `name` may be the common name of a certificate of `role`.
Status validate_common_name(CertificateRole role, std::string_view name);

// INVALID_ARGUMENT naming the first thing wrong in `request` (common name, names, addresses,
// days), so a command can refuse before it changes anything. issue_certificate checks it too.
Status validate_leaf_request(const LeafRequest& request);

// A new CA: `O=rosetctl, OU=ca, CN=rosetctl CA <16 hex>`, critical CA:TRUE with pathlen 0,
// keyCertSign and cRLSign, valid for `days`.
Expected<CertificateAndKey> make_certificate_authority(int days = kCaValidityDays);

// A leaf certificate signed by the CA: serverAuth and clientAuth, digitalSignature, CA:FALSE.
// Its validity starts 5 minutes ago (clocks of other hosts may lag) and ends after
// `request.days`, or when the CA's does if that is sooner. FAILED_PRECONDITION when the CA's
// key does not belong to its certificate or the certificate is not a CA.
Expected<CertificateAndKey> issue_certificate(const LeafRequest& request,
                                              std::string_view ca_certificate_pem,
                                              const SecretText& ca_key_pem);

// What a certificate says, texts made printable (hostile bytes shown as \xNN).
struct CertificateFacts {
  std::string subject;            // "O=rosetctl, OU=node, CN=node-a", in the certificate's order
  std::string issuer;             // likewise
  std::string role;               // the subject's OU ("" when it has none)
  std::string common_name;        // the subject's CN ("" when it has none)
  std::vector<std::string> sans;  // "DNS:node-a", "IP:10.0.0.1", in the certificate's order
  std::string not_before;         // RFC 3339 UTC
  std::string not_after;
  int64_t not_after_unix = 0;
  std::string serial;  // hex
  bool is_ca = false;
  std::vector<std::string> extended_key_usage;  // "serverAuth", "clientAuth", ...
};

// The facts of the first certificate in `pem`. INVALID_ARGUMENT when it holds none; `what`
// names the source in that message ("certificate file \"/etc/x.crt\"").
Expected<CertificateFacts> read_certificate_facts(std::string_view pem, std::string_view what);

// Who a peer's certificate says it is: its subject's OU (the role) and CN (the name), read
// through libcrypto's X.509 API (never by splitting the printed subject, where a CN may hold
// "\\,OU=admin"). Both are "" unless the subject has exactly one OU and one CN. Texts are made
// printable as in CertificateFacts, so a hostile byte never matches a valid name.
struct CertificateIdentity {
  std::string role;
  std::string common_name;
  int64_t not_before_unix = 0;  // its validity's start: what a revocation compares
};
Expected<CertificateIdentity> read_certificate_identity(std::string_view pem);

}  // namespace rosetctl
