#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kIllegalTransition:
      return "IllegalTransition";
    case ErrorCode::kOwnershipViolation:
      return "OwnershipViolation";
    case ErrorCode::kBackendFailure:
      return "BackendFailure";
    case ErrorCode::kBadConfig:
      return "BadConfig";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kConflict:
      return "Conflict";
    case ErrorCode::kStaleGeneration:
      return "StaleGeneration";
    case ErrorCode::kUnavailable:
      return "Unavailable";
    case ErrorCode::kTimeout:
      return "Timeout";
    case ErrorCode::kResourceExhausted:
      return "ResourceExhausted";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

}  // namespace pynenc_cpp
