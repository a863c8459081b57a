// Libraries loaded with dlopen at first use rather than with the program (libcurl for the Roset
// API, libcrypto for content addresses): linked, the dynamic loader maps and relocates them at
// every rosetctl run, and they stay resident in a `serve` that never uses them (bench/README.md).
#pragma once

#include <dlfcn.h>

#include <string_view>

#include "core/status.h"

namespace rosetctl {

// dlopen(soname) for good (never closed). UNAVAILABLE naming the library, what it is `for`
// and the Debian package to install when it cannot be loaded.
Expected<void*> open_shared_library(const char* soname, std::string_view for_what,
                                    std::string_view package);

// Points `slot` at `symbol` in `library`; false when the library lacks it (too old).
template <typename Function>
bool bind_symbol(void* library, const char* symbol, Function* slot) {
  *slot = reinterpret_cast<Function>(::dlsym(library, symbol));
  return *slot != nullptr;
}

}  // namespace rosetctl
