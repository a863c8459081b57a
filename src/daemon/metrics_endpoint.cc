// The /metrics listener on cpp-httplib.
#include "daemon/metrics_endpoint.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "daemon/metrics.h"
#include "daemon/server.h"

namespace rosetctl {

Expected<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(ServiceContext& context,
                                                                  const std::string& address) {
  ROSETCTL_RETURN_IF_ERROR(check_tcp_address(address, "--metrics-listen", /*port_zero_ok=*/true));
  size_t colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  int port = std::stoi(address.substr(colon + 1));

  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *endpoint->server_;
  // Two threads: scrapes come every few seconds, not in crowds (the default is one per core
  // and at least eight).
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  server.Get("/metrics", [&context](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics_text(context), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (port == 0) {
    port = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return error(Code::kUnavailable,
                 "--metrics-listen: cannot listen on {} (address in use or not on this host)",
                 address);
  }
  endpoint->port_ = port;
  enable_call_metrics();
  endpoint->thread_ = std::thread([&server] { server.listen_after_bind(); });
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace rosetctl
