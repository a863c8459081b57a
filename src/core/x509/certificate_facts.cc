// Reading a certificate back: subject, issuer, role, names, validity (certificates.h). The
// certificate may be anyone's, so every text taken from it is made printable.
#include <arpa/inet.h>

#include <cctype>
#include <ctime>
#include <utility>

#include "core/clock.h"
#include "core/x509/certificates.h"
#include "core/x509/libcrypto_x509.h"
#include "core/x509/pem.h"

namespace rosetctl {
namespace {

// Control characters and backslashes as \xNN, so a hostile name cannot forge output lines.
std::string printable_certificate_text(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || byte == '\\') {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

std::string asn1_text(const ASN1_STRING* value) {
  unsigned char* utf8 = nullptr;
  int length = libcrypto_x509().ASN1_STRING_to_UTF8(&utf8, value);
  if (length < 0) return "?";
  LibcryptoString owned(reinterpret_cast<char*>(utf8));
  return printable_certificate_text({owned.get(), static_cast<std::size_t>(length)});
}

// "O=rosetctl, OU=node, CN=node-a": entries in the certificate's order, short field names.
std::string name_text(const X509_NAME* name) {
  const LibcryptoX509& api = libcrypto_x509();
  std::string out;
  for (int i = 0; i < api.X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* entry = api.X509_NAME_get_entry(name, i);
    const char* field = api.OBJ_nid2sn(api.OBJ_obj2nid(api.X509_NAME_ENTRY_get_object(entry)));
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", field != nullptr ? field : "?",
                       asn1_text(api.X509_NAME_ENTRY_get_data(entry)));
  }
  return out;
}

// How many entries of field `nid` `name` has.
int name_field_count(const X509_NAME* name, int nid) {
  const LibcryptoX509& api = libcrypto_x509();
  int count = 0;
  for (int i = 0; i < api.X509_NAME_entry_count(name); ++i) {
    count +=
        api.OBJ_obj2nid(api.X509_NAME_ENTRY_get_object(api.X509_NAME_get_entry(name, i))) == nid;
  }
  return count;
}

// The first value of field `nid` in `name`, or "".
std::string name_field(const X509_NAME* name, int nid) {
  const LibcryptoX509& api = libcrypto_x509();
  for (int i = 0; i < api.X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* entry = api.X509_NAME_get_entry(name, i);
    if (api.OBJ_obj2nid(api.X509_NAME_ENTRY_get_object(entry)) == nid) {
      return asn1_text(api.X509_NAME_ENTRY_get_data(entry));
    }
  }
  return "";
}

std::string general_name_text(const GENERAL_NAME* name) {
  const LibcryptoX509& api = libcrypto_x509();
  switch (name->type) {
    case GEN_DNS:
      return "DNS:" + asn1_text(name->d.dNSName);
    case GEN_EMAIL:
      return "email:" + asn1_text(name->d.rfc822Name);
    case GEN_URI:
      return "URI:" + asn1_text(name->d.uniformResourceIdentifier);
    case GEN_IPADD: {
      int length = api.ASN1_STRING_length(name->d.iPAddress);
      int family = length == 4 ? AF_INET : length == 16 ? AF_INET6 : -1;
      char text[INET6_ADDRSTRLEN];
      if (family < 0 || ::inet_ntop(family, api.ASN1_STRING_get0_data(name->d.iPAddress), text,
                                    sizeof text) == nullptr) {
        return "IP:?";
      }
      return std::string("IP:") + text;
    }
    default:
      return "other";
  }
}

std::vector<std::string> alt_names_of(X509* certificate) {
  const LibcryptoX509& api = libcrypto_x509();
  GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(
      api.X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr)));
  std::vector<std::string> out;
  if (!names) return out;
  // sk_GENERAL_NAME_num/value are inline wrappers of these.
  const auto* stack = reinterpret_cast<const OPENSSL_STACK*>(names.get());
  for (int i = 0; i < api.OPENSSL_sk_num(stack); ++i) {
    out.push_back(
        general_name_text(static_cast<const GENERAL_NAME*>(api.OPENSSL_sk_value(stack, i))));
  }
  return out;
}

std::vector<std::string> extended_key_usage_of(X509* certificate) {
  uint32_t flags = libcrypto_x509().X509_get_extended_key_usage(certificate);
  std::vector<std::string> out;
  if (flags == UINT32_MAX) return out;  // no extension at all
  constexpr std::pair<uint32_t, const char*> kUsageNames[] = {
      {XKU_SSL_SERVER, "serverAuth"},     {XKU_SSL_CLIENT, "clientAuth"},
      {XKU_SMIME, "emailProtection"},     {XKU_CODE_SIGN, "codeSigning"},
      {XKU_OCSP_SIGN, "OCSPSigning"},     {XKU_TIMESTAMP, "timeStamping"},
      {XKU_ANYEKU, "anyExtendedKeyUsage"}};
  for (const auto& [flag, name] : kUsageNames) {
    if ((flags & flag) != 0) out.emplace_back(name);
  }
  return out;
}

Expected<std::string> serial_of(X509* certificate) {
  const LibcryptoX509& api = libcrypto_x509();
  BignumPtr serial(api.ASN1_INTEGER_to_BN(api.X509_get0_serialNumber(certificate), nullptr));
  if (!serial) return libcrypto_error("cannot read the serial number");
  LibcryptoString hex(api.BN_bn2hex(serial.get()));
  if (!hex) return libcrypto_error("cannot print the serial number");
  std::string out = hex.get();
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Expected<CertificateFacts> read_certificate_facts(std::string_view pem, std::string_view what) {
  auto api = load_libcrypto_x509();
  if (!api) return api.status();
  auto certificate = certificate_from_pem(pem, what);
  if (!certificate) return certificate.status();
  X509* cert = certificate->get();
  CertificateFacts facts;
  const X509_NAME* subject = (*api)->X509_get_subject_name(cert);
  facts.subject = name_text(subject);
  facts.issuer = name_text((*api)->X509_get_issuer_name(cert));
  facts.role = name_field(subject, NID_organizationalUnitName);
  facts.common_name = name_field(subject, NID_commonName);
  facts.sans = alt_names_of(cert);
  auto not_before = unix_time_of((*api)->X509_get0_notBefore(cert));
  if (!not_before) return not_before.status();
  auto not_after = unix_time_of((*api)->X509_get0_notAfter(cert));
  if (!not_after) return not_after.status();
  facts.not_before = utc_time_text(*not_before);
  facts.not_after = utc_time_text(*not_after);
  facts.not_after_unix = *not_after;
  auto serial = serial_of(cert);
  if (!serial) return serial.status();
  facts.serial = std::move(*serial);
  facts.is_ca = (*api)->X509_check_ca(cert) != 0;
  facts.extended_key_usage = extended_key_usage_of(cert);
  return facts;
}

Expected<CertificateIdentity> read_certificate_identity(std::string_view pem) {
  auto api = load_libcrypto_x509();
  if (!api) return api.status();
  auto certificate = certificate_from_pem(pem, "the peer's certificate");
  if (!certificate) return certificate.status();
  const X509_NAME* subject = (*api)->X509_get_subject_name(certificate->get());
  CertificateIdentity identity;
  // One OU and one CN, or no identity: a subject with two OUs names two roles at once.
  if (name_field_count(subject, NID_organizationalUnitName) != 1 ||
      name_field_count(subject, NID_commonName) != 1) {
    return identity;
  }
  auto not_before = unix_time_of((*api)->X509_get0_notBefore(certificate->get()));
  if (!not_before) return identity;  // no time: no identity, as for a strange subject
  identity.role = name_field(subject, NID_organizationalUnitName);
  identity.common_name = name_field(subject, NID_commonName);
  identity.not_before_unix = *not_before;
  return identity;
}

}  // namespace rosetctl
