#include "core/x509/libcrypto_x509.h"

#include <cassert>
#include <mutex>
#include <optional>

#include "core/shared_library.h"

namespace rosetctl {
namespace {

// The soname Debian's libssl3 provides, the one the headers describe.
constexpr const char* kLibcryptoX509Soname = "libcrypto.so.3";

LibcryptoX509 loaded_x509_table;
std::optional<Status> x509_load_failure;  // set once loading failed
std::once_flag x509_load_once;

Status bind_x509_table() {
  auto library = open_shared_library(kLibcryptoX509Soname, "to make certificates", "libssl3");
  if (!library) return library.status();
  bool complete = true;
#define ROSETCTL_LIBCRYPTO_BIND(name) \
  complete = complete && bind_symbol(*library, #name, &loaded_x509_table.name);
  ROSETCTL_LIBCRYPTO_X509_FUNCTIONS(ROSETCTL_LIBCRYPTO_BIND)
#undef ROSETCTL_LIBCRYPTO_BIND
  if (!complete) {
    return error(Code::kUnavailable,
                 "{} lacks a function certificates need; it is older than OpenSSL 3.0",
                 kLibcryptoX509Soname);
  }
  return Status::ok();
}

}  // namespace

Expected<const LibcryptoX509*> load_libcrypto_x509() {
  std::call_once(x509_load_once, [] {
    if (Status bound = bind_x509_table(); !bound) x509_load_failure = bound;
  });
  if (x509_load_failure) return *x509_load_failure;
  return &loaded_x509_table;
}

const LibcryptoX509& libcrypto_x509() {
  assert(loaded_x509_table.X509_free != nullptr && "libcrypto used before it was loaded");
  return loaded_x509_table;
}

Status libcrypto_error(std::string_view what) {
  const LibcryptoX509& api = libcrypto_x509();
  std::string reasons;
  while (unsigned long code = api.ERR_get_error()) {
    char text[256];
    api.ERR_error_string_n(code, text, sizeof text);
    if (!reasons.empty()) reasons += "; ";
    reasons += text;
  }
  if (reasons.empty()) reasons = "no reason given";
  return error(Code::kInternal, "{}: {}", what, reasons);
}

}  // namespace rosetctl
