#include "providers/roset/curl_library.h"

#include <dlfcn.h>

#include <mutex>

namespace rosetctl {
namespace {

// The soname Debian's libcurl4 (OpenSSL flavour) provides, the one the headers describe.
constexpr const char* kSoname = "libcurl.so.4";

template <typename Function>
bool bind(void* library, const char* symbol, Function* slot) {
  *slot = reinterpret_cast<Function>(::dlsym(library, symbol));
  return *slot != nullptr;
}

Expected<const CurlLibrary*> load() {
  static CurlLibrary curl;
  // Never closed: the handles and the global state live until the process ends.
  void* library = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    return error(Code::kUnavailable,
                 "cannot load {} for the Roset API ({}); install the libcurl4 package", kSoname,
                 why != nullptr ? why : "unknown error");
  }
  bool complete = bind(library, "curl_global_init", &curl.global_init) &&
                  bind(library, "curl_easy_init", &curl.easy_init) &&
                  bind(library, "curl_easy_cleanup", &curl.easy_cleanup) &&
                  bind(library, "curl_easy_reset", &curl.easy_reset) &&
                  bind(library, "curl_easy_setopt", &curl.easy_setopt) &&
                  bind(library, "curl_easy_perform", &curl.easy_perform) &&
                  bind(library, "curl_easy_getinfo", &curl.easy_getinfo) &&
                  bind(library, "curl_easy_strerror", &curl.easy_strerror) &&
                  bind(library, "curl_slist_append", &curl.slist_append) &&
                  bind(library, "curl_slist_free_all", &curl.slist_free_all);
  if (!complete) {
    return error(Code::kUnavailable, "{} lacks a function rosetctl needs; it is too old", kSoname);
  }
  if (CURLcode code = curl.global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK) {
    return error(Code::kUnavailable, "cannot initialise {}: {}", kSoname, curl.easy_strerror(code));
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
