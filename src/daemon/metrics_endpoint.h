// The HTTP listener of `serve --metrics-listen`: GET /metrics answers metrics_text()
// (daemon/metrics.h). cpp-httplib serves it on threads of its own, in a module loaded only here
// (metrics_http/metrics_http.h); plain HTTP, as Prometheus scrapes, and nothing on it changes
// state.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "daemon/service_context.h"
#include "metrics_http/metrics_http.h"

namespace rosetctl {

class MetricsEndpoint {
 public:
  // Listens on `address` ("ADDR:PORT", "[IPV6]:PORT"; port 0 picks one) and enables the call
  // metrics. UNAVAILABLE naming the address when it cannot be bound.
  static Expected<std::unique_ptr<MetricsEndpoint>> start(ServiceContext& context,
                                                          const std::string& address);
  // Stops listening and waits for a scrape in progress.
  ~MetricsEndpoint();

  int port() const { return port_; }

 private:
  MetricsEndpoint() = default;

  std::unique_ptr<MetricsHttp> http_;  // its destructor stops the listener
  int port_ = 0;
};

}  // namespace rosetctl
