// Unpredictable identifiers (volume ids, idempotency keys) from OpenSSL's CSPRNG.
#pragma once

#include <cstddef>
#include <string>

namespace rosetctl {

// `bytes` random bytes as lowercase hex (2 * bytes characters). Aborts if the CSPRNG fails:
// handing out a predictable or repeated id would be worse than stopping.
std::string random_hex(std::size_t bytes);

}  // namespace rosetctl
