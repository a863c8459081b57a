// spdlog configuration shared by the CLI and `serve`.
#include "core/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>

#include "core/validate.h"

namespace rosetctl {
namespace {

// The last guard of "one line per log call": a message that still holds a control character
// (outside text some call site did not escape) is escaped whole, by the rule every field
// follows (escape_text), so nothing after a newline can pass for a line of its own.
class OneLineFormatter final : public spdlog::formatter {
 public:
  explicit OneLineFormatter(std::string pattern)
      : pattern_(std::move(pattern)),
        lines_(std::make_unique<spdlog::pattern_formatter>(pattern_)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view payload(msg.payload.data(), msg.payload.size());
    bool one_line = std::none_of(payload.begin(), payload.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (one_line) return lines_->format(msg, dest);
    std::string escaped = escape_text(payload);
    spdlog::details::log_msg copy = msg;
    copy.payload = escaped;
    lines_->format(copy, dest);
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<OneLineFormatter>(pattern_);
  }

 private:
  std::string pattern_;
  std::unique_ptr<spdlog::pattern_formatter> lines_;
};

}  // namespace

void setup_logging(Verbosity verbosity, bool long_running) {
  spdlog::drop("rosetctl");  // `serve` replaces the CLI's logger with its own
  auto logger = spdlog::stderr_logger_mt("rosetctl");
  logger->set_formatter(std::make_unique<OneLineFormatter>(
      long_running ? "%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v" : "rosetctl: %l: %v"));
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
