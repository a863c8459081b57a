// The HTTP listener of `serve --metrics-listen`: GET /metrics answers metrics_text()
// (daemon/metrics.h). cpp-httplib serves it on threads of its own; plain HTTP, as Prometheus
// scrapes, and nothing on it changes state.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "daemon/service_context.h"

namespace httplib {
class Server;
}

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

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;  // runs the server's accept loop
  int port_ = 0;
};

}  // namespace rosetctl
