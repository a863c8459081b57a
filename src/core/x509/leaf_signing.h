// Signing a leaf certificate for a public key someone else holds: `tls issue` makes the key
// itself (certificates.h issue_certificate), the controller's enrollment signs the key of a
// node's certificate request (certificate_requests.h). Callers have loaded libcrypto.
#pragma once

#include <chrono>
#include <string_view>

#include "core/status.h"
#include "core/x509/certificates.h"
#include "core/x509/libcrypto_x509.h"

namespace rosetctl {

// A new EC P-256 key.
Expected<EvpPkeyPtr> make_p256_key();

// A certificate of `request`'s role, name and SANs (request.days is not read) for
// `subject_key`, signed by the CA, valid from 5 minutes ago for `validity` (at least a minute)
// or until the CA's own end, whichever is sooner. FAILED_PRECONDITION when the CA's key does not
// belong to its certificate or the certificate is not a CA or has expired.
Expected<X509Ptr> sign_leaf(const LeafRequest& request, std::chrono::seconds validity,
                            EVP_PKEY* subject_key, std::string_view ca_certificate_pem,
                            const SecretText& ca_key_pem);

}  // namespace rosetctl
