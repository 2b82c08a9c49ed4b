// DescribeBackend: picks the backend's own report by the URI's scheme.
#include "pynenc_cpp/ports/backend_report.h"

namespace pynenc_cpp {

Result<BackendReport> DescribeBackend(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  switch (parsed.value().kind) {
    case BackendKind::kSqlite:
      return sqlite::Describe(config);
    case BackendKind::kRedis:
      return redis::Describe(config);
    case BackendKind::kMemory:
      break;
  }
  BackendReport report;
  report.backend = "memory";
  report.facts.emplace_back("storage", "this process's memory (nothing survives it)");
  return report;
}

}  // namespace pynenc_cpp
