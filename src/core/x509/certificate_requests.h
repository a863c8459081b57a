// Certificate signing requests (PKCS#10) for a node that gets its certificate from its
// controller instead of `tls issue` (cluster/enrollment_service.h): the node makes its key, which
// never leaves it, and sends a request holding the public key, signed with it; the controller
// signs a certificate for that key with a name of its own choosing. The request's subject is
// never read: who the certificate names is the signer's decision alone.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/x509/certificates.h"
#include "core/x509/secret_text.h"

namespace rosetctl {

struct RequestAndKey {
  std::string request_pem;  // "BEGIN CERTIFICATE REQUEST", no subject
  SecretText key_pem;       // EC P-256, PKCS#8, unencrypted
};

// A new key and a request for it.
Expected<RequestAndKey> make_certificate_request();

// The certificate (PEM) for the key of `request_pem`, as `order` says (role, name, SANs) and
// valid for `validity`, signed by the CA. INVALID_ARGUMENT when the text is no request, its key
// is not EC P-256 or its signature is not made with that key (no proof the sender holds it).
Expected<std::string> sign_certificate_request(std::string_view request_pem,
                                               const LeafRequest& order,
                                               std::chrono::seconds validity,
                                               std::string_view ca_certificate_pem,
                                               const SecretText& ca_key_pem);

}  // namespace rosetctl
