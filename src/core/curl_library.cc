#include "core/curl_library.h"

#include <mutex>

#include "core/shared_library.h"

namespace rosetctl {
namespace {

// The soname Debian's libcurl4 (OpenSSL flavour) provides, the one the headers describe.
constexpr const char* kLibcurl = "libcurl.so.4";

Expected<const CurlLibrary*> load() {
  static CurlLibrary curl;
  // Never closed: the handles and the global state live until the process ends.
  auto opened = open_shared_library(kLibcurl, "for HTTPS (the Roset API, Kubernetes TokenReview)",
                                    "libcurl4");
  if (!opened) return opened.status();
  void* library = *opened;
  bool complete = bind_symbol(library, "curl_global_init", &curl.global_init) &&
                  bind_symbol(library, "curl_easy_init", &curl.easy_init) &&
                  bind_symbol(library, "curl_easy_cleanup", &curl.easy_cleanup) &&
                  bind_symbol(library, "curl_easy_reset", &curl.easy_reset) &&
                  bind_symbol(library, "curl_easy_setopt", &curl.easy_setopt) &&
                  bind_symbol(library, "curl_easy_perform", &curl.easy_perform) &&
                  bind_symbol(library, "curl_easy_getinfo", &curl.easy_getinfo) &&
                  bind_symbol(library, "curl_easy_strerror", &curl.easy_strerror) &&
                  bind_symbol(library, "curl_slist_append", &curl.slist_append) &&
                  bind_symbol(library, "curl_slist_free_all", &curl.slist_free_all);
  if (!complete) {
    return error(Code::kUnavailable, "{} lacks a function rosetctl needs; it is too old", kLibcurl);
  }
  if (CURLcode code = curl.global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK) {
    return error(Code::kUnavailable, "cannot initialise {}: {}", kLibcurl,
                 curl.easy_strerror(code));
  }
  return &curl;
}

}  // namespace

Expected<const CurlLibrary*> CurlLibrary::get() {
  static std::once_flag once;
  static Expected<const CurlLibrary*> loaded = error(Code::kInternal, "libcurl not loaded yet");
  std::call_once(once, [] { loaded = load(); });
  return loaded;
}

}  // namespace rosetctl
