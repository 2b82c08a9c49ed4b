#include "mem/mem_trigger_store.h"
#include "redis/redis_trigger_store.h"
#include "sqlite/sqlite_trigger_store.h"

namespace pynenc_cpp {

Result<std::unique_ptr<TriggerStore>> OpenTriggerStore(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind == BackendKind::kMemory) return NewMemTriggerStore(config);
  if (parsed.value().kind == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
    if (!client.ok()) return client.status();
    return NewRedisTriggerStore(std::move(client).value(), config);
  }
  Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
  if (!db.ok()) return db.status();
  return NewSqliteTriggerStore(std::move(db).value(), config);
}

Result<EventMarkerState> ParseEventMarkerState(const std::string& state) {
  if (state == "all") return EventMarkerState::kAll;
  if (state == "matched") return EventMarkerState::kMatched;
  if (state == "unmatched") return EventMarkerState::kUnmatched;
  if (state == "triggered") return EventMarkerState::kTriggered;
  if (state == "untriggered") return EventMarkerState::kUntriggered;
  return Status::InvalidArgument("unknown event marker state '" + state +
                                 "'; expected one of all, matched, unmatched, triggered, "
                                 "untriggered");
}

}  // namespace pynenc_cpp
