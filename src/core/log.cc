// spdlog configuration shared by the CLI and `serve`.
#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace rosetctl {

void setup_logging(Verbosity verbosity, bool long_running) {
  spdlog::drop("rosetctl");  // `serve` replaces the CLI's logger with its own
  auto logger = spdlog::stderr_logger_mt("rosetctl");
  logger->set_pattern(long_running ? "%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v" : "rosetctl: %l: %v");
  switch (verbosity) {
    case Verbosity::kQuiet:
      logger->set_level(spdlog::level::err);
      break;
    case Verbosity::kNormal:
      logger->set_level(long_running ? spdlog::level::info : spdlog::level::warn);
      break;
    case Verbosity::kDebug:
      logger->set_level(spdlog::level::debug);
      break;
  }
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace rosetctl
