// The HTTP listener of the metrics endpoint (daemon/metrics_endpoint.h), built as a module of its
// own (metrics_http_module.cc): it alone links cpp-httplib, and through it brotli, zlib and
// OpenSSL's libssl. serve loads it with dlopen when --metrics-listen asks for it; linked into
// rosetctl, the dynamic loader mapped and relocated those libraries at every CLI run
// (bench/README.md, issue 35). The module is carried inside the binary
// (daemon/metrics_module.cc), so there is still one file to install.
#pragma once

#include <functional>
#include <string>

namespace rosetctl {

class MetricsHttp {
 public:
  virtual ~MetricsHttp() = default;  // stops listening and waits for a scrape in progress
  virtual int port() const = 0;
};

// The module's one entry point (extern "C", looked up with dlsym): listens on `host`:`port`
// (port 0 picks one) and answers GET /metrics with `body()`; null when it cannot bind.
using MetricsHttpListen = MetricsHttp* (*)(const std::string& host, int port,
                                           std::function<std::string()> body);
inline constexpr const char* kMetricsHttpListenSymbol = "rosetctl_metrics_http_listen";

}  // namespace rosetctl
