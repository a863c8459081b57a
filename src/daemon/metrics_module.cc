#include "daemon/metrics_module.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "core/unique_fd.h"

// Defined by the file src/CMakeLists.txt generates (metrics_http_embedded.cc).
extern "C" const unsigned char rosetctl_metrics_http_module[];
extern "C" const unsigned char rosetctl_metrics_http_module_end[];

namespace rosetctl {
namespace {

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U  // Linux 6.3; vm.memfd_noexec=1 makes memfds not executable without it
#endif

Expected<MetricsHttpListen> load_module() {
  auto unavailable = [](std::string_view why) {
    return error(Code::kUnavailable,
                 "--metrics-listen: cannot load the metrics HTTP module: {}; install the "
                 "libcpp-httplib0.11 package",
                 why);
  };
  UniqueFd fd(::memfd_create("rosetctl-metrics-http", MFD_CLOEXEC | MFD_EXEC));
  if (!fd.valid() && errno == EINVAL)
    fd = UniqueFd(::memfd_create("rosetctl-metrics-http", MFD_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, "--metrics-listen: cannot create a memfd");
  const unsigned char* next = rosetctl_metrics_http_module;
  while (next < rosetctl_metrics_http_module_end) {
    ssize_t written = ::write(fd.get(), next, rosetctl_metrics_http_module_end - next);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return errno_status(errno, "--metrics-listen: cannot write a memfd");
    next += written;
  }
  std::string path = fmt::format("/proc/self/fd/{}", fd.get());
  // The descriptor closes on return; the mapping dlopen made stays.
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    const char* why = ::dlerror();
    return unavailable(why != nullptr ? why : "unknown error");
  }
  auto listen = reinterpret_cast<MetricsHttpListen>(::dlsym(module, kMetricsHttpListenSymbol));
  if (listen == nullptr) return unavailable("it has no entry point");
  return listen;
}

}  // namespace

Expected<MetricsHttpListen> load_metrics_http() {
  static std::once_flag once;
  static Expected<MetricsHttpListen> loaded = error(Code::kInternal, "not loaded");
  std::call_once(once, [] { loaded = load_module(); });
  return loaded;
}

}  // namespace rosetctl
