// Taking the API key out of text that came from elsewhere (a Roset response body, roset-fuse's
// output) before any message or log line is built from it: a server that echoes the request's
// `Authorization` header must not put the key into our errors.
#pragma once

#include <string>
#include <string_view>

namespace rosetctl {

// Every occurrence of `secret` in `text` replaced by "[redacted]" (so `Bearer <key>` becomes
// `Bearer [redacted]`). An empty secret changes nothing.
std::string scrub_secret(std::string text, std::string_view secret);

// A response body with `secret` gone in every form a reader could get it back from: as
// written, and inside the strings of a JSON body as they decode (a server may write "/" as
// "\/" or any character as "\uXXXX"). A JSON body is rewritten only when it held the secret.
std::string scrub_secret_from_body(std::string body, std::string_view secret);

}  // namespace rosetctl
