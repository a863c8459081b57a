// Roset API failures as CSI status codes with messages a person can act on. Error bodies are
// `{error, code, details}`; anything else (an HTML page from a proxy) is described by status.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

struct ApiErrorBody {
  std::string message;           // `error`
  std::string code;              // `code`: NODE_NOT_FOUND, NAME_CONFLICT, ...
  std::string existing_node_id;  // details.existingNodeId of a NAME_CONFLICT
  std::string request_id;        // `requestId`, when the body carries one
};

// Tolerant: a body that is not JSON, or JSON of another shape, gives empty fields.
ApiErrorBody parse_error_body(std::string_view body);

// `what` says what was attempted: `create folder "/volumes/db"`. The server's words are quoted
// escaped (core/validate.h), as outside text; the body must already be scrubbed of the key
// (HttpClient does that to every body it receives). The mapping:
// 400 → INVALID_ARGUMENT, 401 → UNAUTHENTICATED, 402 → RESOURCE_EXHAUSTED,
// 403 → PERMISSION_DENIED, 404 → NOT_FOUND, 409 → ALREADY_EXISTS, 429 → UNAVAILABLE (after
// retries), 501 → UNIMPLEMENTED, 503/502/504 → UNAVAILABLE, other 5xx → INTERNAL.
Status status_from_http(long http_status, std::string_view body, std::string_view what);

}  // namespace rosetctl
