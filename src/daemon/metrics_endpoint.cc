// The /metrics listener: the address checked here, the HTTP side in the module of
// metrics_http/metrics_http.h, loaded by daemon/metrics_module.h.
#include "daemon/metrics_endpoint.h"

#include "daemon/metrics.h"
#include "daemon/metrics_module.h"
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
  auto listen = load_metrics_http();
  if (!listen) return listen.status();
  endpoint->http_.reset((*listen)(host, port, [&context] { return metrics_text(context); }));
  if (!endpoint->http_) {
    return error(Code::kUnavailable,
                 "--metrics-listen: cannot listen on {} (address in use or not on this host)",
                 address);
  }
  port = endpoint->http_->port();
  endpoint->port_ = port;
  enable_call_metrics();
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace rosetctl
