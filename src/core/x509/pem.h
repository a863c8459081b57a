// PEM text to libcrypto objects and back, for certificates.cc and certificate_facts.cc. Callers
// have loaded libcrypto (load_libcrypto_x509) first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/x509/libcrypto_x509.h"
#include "core/x509/secret_text.h"

namespace rosetctl {

// The first certificate in `pem`; INVALID_ARGUMENT "<what> holds no PEM certificate" otherwise.
Expected<X509Ptr> certificate_from_pem(std::string_view pem, std::string_view what);

// The private key in `pem`; INVALID_ARGUMENT when there is none or it is encrypted (never a
// passphrase prompt: rosetctl runs unattended).
Expected<EvpPkeyPtr> private_key_from_pem(const SecretText& pem, std::string_view what);

Expected<std::string> certificate_to_pem(X509* certificate);

// A certificate signing request (PKCS#10, "BEGIN CERTIFICATE REQUEST"); INVALID_ARGUMENT
// "<what> holds no PEM certificate request" when `pem` has none.
Expected<X509ReqPtr> request_from_pem(std::string_view pem, std::string_view what);
Expected<std::string> request_to_pem(X509_REQ* request);

// PKCS#8 ("BEGIN PRIVATE KEY"), unencrypted; built in libcrypto's cleansing memory.
Expected<SecretText> private_key_to_pem(EVP_PKEY* key);

// Seconds since the epoch of a certificate time.
Expected<int64_t> unix_time_of(const ASN1_TIME* time);

}  // namespace rosetctl
