#include "pynenc_cpp/ports/storage.h"

#include "mem/mem_broker.h"
#include "mem/mem_client_data_store.h"
#include "mem/mem_fenced_store.h"
#include "mem/mem_generation_source.h"
#include "mem/mem_journal.h"
#include "mem/mem_orchestrator.h"
#include "mem/mem_state_backend.h"
#include "mem/mem_trigger_store.h"
#include "lifecycle/port_lifecycle.h"
#include "redis/redis_broker.h"
#include "redis/redis_client.h"
#include "redis/redis_client_data_store.h"
#include "redis/redis_fenced_store.h"
#include "redis/redis_generation_source.h"
#include "redis/redis_journal.h"
#include "redis/redis_orchestrator.h"
#include "redis/redis_state_backend.h"
#include "redis/redis_trigger_store.h"
#include "sqlite/sqlite_broker.h"
#include "sqlite/sqlite_client_data_store.h"
#include "sqlite/sqlite_db.h"
#include "sqlite/sqlite_fenced_store.h"
#include "sqlite/sqlite_generation_source.h"
#include "sqlite/sqlite_journal.h"
#include "sqlite/sqlite_orchestrator.h"
#include "sqlite/sqlite_state_backend.h"
#include "sqlite/sqlite_trigger_store.h"

namespace pynenc_cpp {

Storage::Storage(BackendConfig config, BackendKind kind)
    : config_(std::move(config)), kind_(kind) {}

Storage::~Storage() = default;

Result<std::shared_ptr<Storage>> Storage::Open(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = CheckBackendConfig(config);
  if (!parsed.ok()) return parsed.status();
  std::shared_ptr<Storage> storage(new Storage(config, parsed.value().kind));
  if (storage->kind_ == BackendKind::kRedis) {
    Result<std::shared_ptr<redis::Client>> client = redis::OpenClient(config);
    if (!client.ok()) return client.status();
    storage->client_ = std::move(client).value();
  } else if (storage->kind_ == BackendKind::kSqlite) {
    Result<std::shared_ptr<sqlite::Database>> db = sqlite::OpenDatabase(config);
    if (!db.ok()) return db.status();
    storage->db_ = std::move(db).value();
  }
  return storage;
}

template <typename Port, typename MakeFn>
Result<std::shared_ptr<Port>> Storage::Kept(std::shared_ptr<Port>& slot, MakeFn&& make) {
  if (slot) return slot;
  Result<std::unique_ptr<Port>> made = make();
  if (!made.ok()) return made.status();
  slot = std::shared_ptr<Port>(std::move(made).value());
  return slot;
}

Result<std::unique_ptr<Broker>> Storage::NewBroker() const {
  return Make<Broker>(
      NewMemBroker,
      [](std::shared_ptr<redis::Client> c, const BackendConfig& cfg) {
        return redis::NewRedisBroker(std::move(c), cfg);
      },
      [](std::shared_ptr<sqlite::Database> db, const BackendConfig& cfg) {
        return sqlite::NewSqliteBroker(std::move(db), cfg);
      });
}

Result<std::unique_ptr<StateBackend>> Storage::NewStateBackend() const {
  return Make<StateBackend>(NewMemStateBackend, redis::NewRedisStateBackend,
                            sqlite::NewSqliteStateBackend);
}

Result<std::unique_ptr<Orchestrator>> Storage::NewOrchestrator() const {
  return Make<Orchestrator>(NewMemOrchestrator, NewRedisOrchestrator, NewSqliteOrchestrator);
}

Result<std::unique_ptr<TriggerStore>> Storage::NewTriggerStore() const {
  return Make<TriggerStore>(NewMemTriggerStore, NewRedisTriggerStore, NewSqliteTriggerStore);
}

Result<std::unique_ptr<ClientDataStore>> Storage::NewClientDataStore() const {
  return Make<ClientDataStore>(NewMemClientDataStore, redis::NewRedisClientDataStore,
                               sqlite::NewSqliteClientDataStore);
}

Result<std::unique_ptr<GenerationSource>> Storage::NewGenerationSource() const {
  return Make<GenerationSource>(NewMemGenerationSource, redis::NewRedisGenerationSource,
                                sqlite::NewSqliteGenerationSource);
}

Result<std::unique_ptr<FencedStore>> Storage::NewFencedStore() const {
  return Make<FencedStore>(NewMemFencedStore, redis::NewRedisFencedStore,
                           sqlite::NewSqliteFencedStore);
}

Result<std::unique_ptr<Journal>> Storage::NewJournal() const {
  return Make<Journal>(NewMemJournal, redis::NewRedisJournal, sqlite::NewSqliteJournal);
}

Result<std::shared_ptr<Broker>> Storage::broker() {
  MutexLock lock(mu_);
  return Kept(broker_, [&] { return NewBroker(); });
}

Result<std::shared_ptr<StateBackend>> Storage::state_backend() {
  MutexLock lock(mu_);
  return Kept(state_backend_, [&] { return NewStateBackend(); });
}

Result<std::shared_ptr<Orchestrator>> Storage::orchestrator() {
  MutexLock lock(mu_);
  return Kept(orchestrator_, [&] { return NewOrchestrator(); });
}

Result<std::shared_ptr<TriggerStore>> Storage::trigger_store() {
  MutexLock lock(mu_);
  return Kept(trigger_store_, [&] { return NewTriggerStore(); });
}

Result<std::shared_ptr<ClientDataStore>> Storage::client_data_store() {
  MutexLock lock(mu_);
  return Kept(client_data_store_, [&] { return NewClientDataStore(); });
}

Result<std::unique_ptr<Lifecycle>> Storage::NewLifecycle(bool with_trigger,
                                                         TriggerContextNames names) {
  LifecycleParts parts;
  Result<std::shared_ptr<Orchestrator>> orchestrator = this->orchestrator();
  if (!orchestrator.ok()) return orchestrator.status();
  Result<std::shared_ptr<StateBackend>> state_backend = this->state_backend();
  if (!state_backend.ok()) return state_backend.status();
  Result<std::shared_ptr<Broker>> broker = this->broker();
  if (!broker.ok()) return broker.status();
  parts.orchestrator = orchestrator.value();
  parts.state_backend = state_backend.value();
  parts.broker = broker.value();
  if (with_trigger) {
    Result<std::shared_ptr<TriggerStore>> trigger = trigger_store();
    if (!trigger.ok()) return trigger.status();
    parts.trigger = trigger.value();
  }
  return NewLifecycle(std::move(parts), std::move(names));
}

Result<std::unique_ptr<Lifecycle>> Storage::NewLifecycle(LifecycleParts parts,
                                                         TriggerContextNames names) {
  if (!parts.orchestrator || !parts.state_backend || !parts.broker) {
    return Status::InvalidArgument(
        "Lifecycle needs an orchestrator, a state backend and a broker (got a null one)");
  }
  switch (kind_) {
    case BackendKind::kSqlite:
      return native::NewSqliteLifecycle(std::move(parts), db_, std::move(names));
    case BackendKind::kRedis:
      return native::NewRedisLifecycle(std::move(parts), client_, config_, std::move(names));
    case BackendKind::kMemory:
      break;
  }
  auto in_process = std::make_unique<native::PortLifecycle>(std::move(parts), std::move(names));
  in_process->MarkInProcess();
  return std::unique_ptr<Lifecycle>(std::move(in_process));
}

namespace {

// A port over a Storage of its own, made by `make`.
template <typename Port>
Result<std::unique_ptr<Port>> OnOwnStorage(const BackendConfig& config,
                                           Result<std::unique_ptr<Port>> (Storage::*make)() const) {
  Result<std::shared_ptr<Storage>> storage = Storage::Open(config);
  if (!storage.ok()) return storage.status();
  return (*storage.value().*make)();
}

}  // namespace

Result<std::unique_ptr<Broker>> OpenBroker(const BackendConfig& config) {
  return OnOwnStorage(config, &Storage::NewBroker);
}

Result<std::unique_ptr<StateBackend>> OpenStateBackend(const BackendConfig& config) {
  return OnOwnStorage(config, &Storage::NewStateBackend);
}

Result<std::unique_ptr<Orchestrator>> OpenOrchestrator(const BackendConfig& config) {
  return OnOwnStorage(config, &Storage::NewOrchestrator);
}

Result<std::unique_ptr<TriggerStore>> OpenTriggerStore(const BackendConfig& config) {
  return OnOwnStorage(config, &Storage::NewTriggerStore);
}

Result<std::unique_ptr<ClientDataStore>> OpenClientDataStore(const BackendConfig& config) {
  return OnOwnStorage(config, &Storage::NewClientDataStore);
}

Result<std::unique_ptr<GenerationSource>> OpenGenerationSource(const BackendConfig& config) {
  return OnOwnStorage(config, &Storage::NewGenerationSource);
}

Result<std::unique_ptr<FencedStore>> OpenFencedStore(const BackendConfig& config) {
  return OnOwnStorage(config, &Storage::NewFencedStore);
}

Result<std::unique_ptr<Journal>> OpenJournal(const BackendConfig& config) {
  return OnOwnStorage(config, &Storage::NewJournal);
}

}  // namespace pynenc_cpp
