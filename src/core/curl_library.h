// libcurl, loaded with dlopen at the first HTTPS request (the Roset API, Kubernetes TokenReview)
// rather than with the program.
// Linked normally it brings ~27 shared libraries (TLS, Kerberos, LDAP, ...) that the dynamic
// loader maps and relocates at every CLI run, most of which never talk to Roset: that was a
// third of a `rosetctl` run's start-up (bench/README.md, "CLI start-up").
#pragma once

#include <curl/curl.h>

#include "core/status.h"

namespace rosetctl {

struct CurlLibrary {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_reset) easy_reset;
  decltype(&::curl_easy_setopt) easy_setopt;  // variadic: the arguments are not type-checked
  decltype(&::curl_easy_perform) easy_perform;
  decltype(&::curl_easy_getinfo) easy_getinfo;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;

  // Loads and initialises libcurl once per process (thread-safe). UNAVAILABLE naming the
  // library and the package when it cannot be loaded.
  static Expected<const CurlLibrary*> get();
};

}  // namespace rosetctl
