#include "core/shared_library.h"

namespace rosetctl {

Expected<void*> open_shared_library(const char* soname, std::string_view for_what,
                                    std::string_view package) {
  void* library = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (library != nullptr) return library;
  const char* why = ::dlerror();
  return error(Code::kUnavailable, "cannot load {} {} ({}); install the {} package", soname,
               for_what, why != nullptr ? why : "unknown error", package);
}

}  // namespace rosetctl
