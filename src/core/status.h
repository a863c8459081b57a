// Status and Expected<T>: how recoverable failures travel up the stack as values.
// Codes are the gRPC/CSI status codes (same numbers), so the daemon maps them 1:1.
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace rosetctl {

// Same values as grpc::StatusCode; CSI assigns meaning to each one per RPC.
enum class Code : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "INVALID_ARGUMENT", "NOT_FOUND", ... as the spec writes them.
std::string_view code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context to the message, keeping the code: "volume \"db\": <message>".
  Status with_context(std::string_view context) const {
    return {code_, fmt::format("{}: {}", context, message_)};
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Shorthands that read like the spec's error tables.
template <typename... Args>
Status error(Code code, fmt::format_string<Args...> format, Args&&... args) {
  return {code, fmt::format(format, std::forward<Args>(args)...)};
}

// Builds a Status from errno: "<what>: <strerror>", with a code that fits the errno.
Status errno_status(int err, std::string_view what);

// A value or the Status explaining why there is none (std::expected arrives in C++23).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status status) : value_(std::move(status)) {
    assert(!std::get<Status>(value_).is_ok() && "an Expected error needs a non-OK status");
  }

  bool has_value() const { return std::holds_alternative<T>(value_); }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Status& status() const {
    static const Status ok_status;
    return has_value() ? ok_status : std::get<Status>(value_);
  }

 private:
  std::variant<T, Status> value_;
};

}  // namespace rosetctl

// Returns early with the error when a Status-returning expression fails.
#define ROSETCTL_RETURN_IF_ERROR(expr)                      \
  do {                                                      \
    ::rosetctl::Status rosetctl_status_ = (expr);           \
    if (!rosetctl_status_.is_ok()) return rosetctl_status_; \
  } while (0)
