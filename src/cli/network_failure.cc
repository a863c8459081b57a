// Classifying gRPC's connection errors by the words its transport uses.
#include "cli/network_failure.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/validate.h"

namespace rosetctl::cli {
namespace {

bool says(std::string_view text, std::string_view words) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  auto it = std::search(text.begin(), text.end(), words.begin(), words.end(),
                        [&](char a, char b) { return lower(a) == lower(b); });
  return it != text.end();
}

}  // namespace

bool closed_at_once(const Status& unavailable) {
  return says(unavailable.message(), "socket closed");
}

Status network_failure(std::string_view address, const Status& unavailable, int closed_before) {
  std::string_view details = unavailable.message();
  std::string where = fmt::format("controller {}", display_quoted(address));
  if (closed_at_once(unavailable) && closed_before >= 2) {
    return error(Code::kPermissionDenied,
                 "TLS with {} failed: it closed every connection right after the handshake, "
                 "which is how it refuses a client certificate (from another CA, expired, or "
                 "without a rosetctl role); check that --tls-cert and --tls-key come from the CA "
                 "the controller trusts (rosetctl tls show shows a certificate's issuer and "
                 "validity)",
                 where);
  }
  if (says(details, "certificate") || says(details, "handshake") || says(details, "ssl") ||
      says(details, "tls") || says(details, "alert")) {
    return error(Code::kPermissionDenied,
                 "TLS with {} failed ({}): check that --tls-ca is the CA that signed the "
                 "controller's certificate, that this host's --tls-cert comes from the same CA and "
                 "has not expired, and that the controller's certificate names {}",
                 where, escape_text(details),
                 display_quoted(address.substr(0, address.rfind(':'))));
  }
  std::string cause = says(details, "connection refused")
                          ? "refused the connection (is `rosetctl serve --listen` running there?)"
                      : says(details, "deadline") || says(details, "timed out")
                          ? "did not answer in time"
                      : says(details, "no route") || says(details, "unreachable")
                          ? "cannot be reached (no route to it)"
                          : "is unavailable";
  return error(Code::kUnavailable, "{} {}: {}", where, cause, escape_text(details));
}

}  // namespace rosetctl::cli
