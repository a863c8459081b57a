// Names of status codes and the errno → Status mapping.
#include "core/status.h"

#include <cerrno>
#include <cstring>

namespace rosetctl {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kCancelled:
      return "CANCELLED";
    case Code::kUnknown:
      return "UNKNOWN";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kAlreadyExists:
      return "ALREADY_EXISTS";
    case Code::kPermissionDenied:
      return "PERMISSION_DENIED";
    case Code::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case Code::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case Code::kAborted:
      return "ABORTED";
    case Code::kOutOfRange:
      return "OUT_OF_RANGE";
    case Code::kUnimplemented:
      return "UNIMPLEMENTED";
    case Code::kInternal:
      return "INTERNAL";
    case Code::kUnavailable:
      return "UNAVAILABLE";
    case Code::kDataLoss:
      return "DATA_LOSS";
    case Code::kUnauthenticated:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

Status errno_status(int err, std::string_view what) {
  Code code = Code::kInternal;
  switch (err) {
    case ENOENT:
      code = Code::kNotFound;
      break;
    case EEXIST:
      code = Code::kAlreadyExists;
      break;
    case EACCES:
    case EPERM:
      code = Code::kPermissionDenied;
      break;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
      code = Code::kResourceExhausted;
      break;
    case EBUSY:
      code = Code::kFailedPrecondition;
      break;
    case EINVAL:
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
      code = Code::kInvalidArgument;
      break;
    case ETIMEDOUT:
      code = Code::kDeadlineExceeded;
      break;
    default:
      break;
  }
  return {code, fmt::format("{}: {}", what, std::strerror(err))};
}

}  // namespace rosetctl
