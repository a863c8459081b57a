// Sizes as people write them ("64Mi", "10Gi", "1.5Ti", "500M", "4096") and back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

// Kubernetes-style quantities: binary suffixes Ki Mi Gi Ti Pi Ei, decimal k/K M G T P E, or plain
// bytes. A fraction is allowed with a suffix and rounds up to whole bytes ("0.5Ki" = 512).
// Errors (INVALID_ARGUMENT / OUT_OF_RANGE) name the offending text.
Expected<int64_t> parse_size(std::string_view text);

// The shortest exact form to two decimals, binary or decimal ("64Mi", "1.5Ti", "500M"; binary
// on a tie), else plain bytes. Parses back to the same number of bytes.
std::string format_size(int64_t bytes);

}  // namespace rosetctl
