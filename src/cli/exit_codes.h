// The CLI's exit codes (documented in docs/reference/exit-codes.md, which
// tests/integration/test_docs_reference.py checks against this file): one per family of CSI
// status codes, so scripts can tell "not found" from "in use" without parsing messages.
#pragma once

#include "core/status.h"

namespace rosetctl::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,         // INTERNAL, UNKNOWN, DATA_LOSS, anything else
  kExitUsage = 2,          // bad flags or input: INVALID_ARGUMENT, OUT_OF_RANGE
  kExitNotFound = 3,       // NOT_FOUND
  kExitConflict = 4,       // ALREADY_EXISTS: exists with other properties
  kExitPrecondition = 5,   // FAILED_PRECONDITION: in use, not connected, wrong state
  kExitBusy = 6,           // ABORTED, UNAVAILABLE: try again
  kExitDenied = 7,         // UNAUTHENTICATED, PERMISSION_DENIED
  kExitExhausted = 8,      // RESOURCE_EXHAUSTED
  kExitUnimplemented = 9,  // UNIMPLEMENTED
  kExitTimeout = 10,       // DEADLINE_EXCEEDED, CANCELLED
};

inline int exit_code_for(Code code) {
  switch (code) {
    case Code::kOk:
      return kExitOk;
    case Code::kInvalidArgument:
    case Code::kOutOfRange:
      return kExitUsage;
    case Code::kNotFound:
      return kExitNotFound;
    case Code::kAlreadyExists:
      return kExitConflict;
    case Code::kFailedPrecondition:
      return kExitPrecondition;
    case Code::kAborted:
    case Code::kUnavailable:
      return kExitBusy;
    case Code::kUnauthenticated:
    case Code::kPermissionDenied:
      return kExitDenied;
    case Code::kResourceExhausted:
      return kExitExhausted;
    case Code::kUnimplemented:
      return kExitUnimplemented;
    case Code::kDeadlineExceeded:
    case Code::kCancelled:
      return kExitTimeout;
    default:
      return kExitFailed;
  }
}

}  // namespace rosetctl::cli
