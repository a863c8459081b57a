// route_grpc_logs: gpr_set_log_function into spdlog.
#include "daemon/grpc_logging.h"

#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>

#include "core/validate.h"

namespace rosetctl {
namespace {

std::atomic<bool> errors_as_warnings{false};

void to_spdlog(gpr_log_func_args* args) {
  // gRPC's errors are about a peer or a connection (a client without a certificate), not about
  // rosetctl's own work: warnings. Its info and debug lines matter only when debugging.
  spdlog::level::level_enum level = args->severity == GPR_LOG_SEVERITY_ERROR && errors_as_warnings
                                        ? spdlog::level::warn
                                        : spdlog::level::debug;
  if (!spdlog::should_log(level)) return;
  spdlog::log(level, "grpc: {}", escape_text(args->message != nullptr ? args->message : ""));
}

}  // namespace

void route_grpc_logs(bool long_running) {
  errors_as_warnings = long_running;
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(to_spdlog); });
}

}  // namespace rosetctl
