// One app's storage: the thing that owns the connection pool (redis://), the
// database (sqlite://) or the process memory (memory://) of one (URI, app id),
// and hands out the ports and the native Lifecycle over it.
//
// Whoever owns an app opens its Storage once and takes every port from it: the
// Python adapters do, one Storage per app object and URI
// (python/pynenc_cpp/_storage.py). Every port of one Storage shares its pool or
// database, and, on memory://, its data: the broker, state backend and
// orchestrator of one Storage are the same objects the Lifecycle composes.
// Two Storages never share anything (each memory:// Storage is a world of its
// own; two on one server or file share only what the server or file holds).
// There is no process-wide registry of connections: a pool lives as long as
// the Storage or a port made from it.
//
// The Open<Port>(config) functions of the port headers open a Storage of their
// own and make one port over it (C++ callers and tests that want one port); the
// cluster's ports (generation source, fenced store, journal) come from a Storage
// the same way, New<Port>() on one shared by the caller's ports, or Open<Port>.
#pragma once

#include <memory>
#include <utility>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/native/lifecycle.h"
#include "pynenc_cpp/ports/backend_config.h"
#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/client_data_store.h"
#include "pynenc_cpp/ports/fenced_store.h"
#include "pynenc_cpp/ports/generation_source.h"
#include "pynenc_cpp/ports/journal.h"
#include "pynenc_cpp/ports/orchestrator.h"
#include "pynenc_cpp/ports/state_backend.h"
#include "pynenc_cpp/ports/trigger_store.h"

namespace pynenc_cpp {

namespace redis {
class Client;
}
namespace sqlite {
class Database;
}

// Thread-safe.
class Storage {
 public:
  // Checks `config` and connects: on redis:// one PING through a new pool, on
  // sqlite:// the file opened (created if missing) with its schema table. Errors:
  // kBadConfig for an unusable URI, app id, path or refused credentials;
  // kBackendFailure naming the server for one that cannot be reached.
  static Result<std::shared_ptr<Storage>> Open(const BackendConfig& config);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  const BackendConfig& config() const { return config_; }
  BackendKind kind() const { return kind_; }

  // This Storage's ports: each made on its first call and the same object on
  // every later one. An error (the schema of a file this build cannot use, say)
  // is returned again by the next call, which tries again.
  Result<std::shared_ptr<Broker>> broker();
  Result<std::shared_ptr<StateBackend>> state_backend();
  Result<std::shared_ptr<Orchestrator>> orchestrator();
  Result<std::shared_ptr<TriggerStore>> trigger_store();
  Result<std::shared_ptr<ClientDataStore>> client_data_store();

  // A new port over this Storage (not the kept one): what Open<Port>(config)
  // returns, and what the accessors above keep.
  Result<std::unique_ptr<Broker>> NewBroker() const;
  Result<std::unique_ptr<StateBackend>> NewStateBackend() const;
  Result<std::unique_ptr<Orchestrator>> NewOrchestrator() const;
  Result<std::unique_ptr<TriggerStore>> NewTriggerStore() const;
  Result<std::unique_ptr<ClientDataStore>> NewClientDataStore() const;

  // The cluster's ports over this Storage (its pool or database; on memory:// each a
  // new world of its own, as Open<Port> gives): no Storage keeps one, so each call
  // makes a new port. Their data is separated by the config's app id, which for
  // them is a cluster's name (its namespace).
  Result<std::unique_ptr<GenerationSource>> NewGenerationSource() const;
  Result<std::unique_ptr<FencedStore>> NewFencedStore() const;
  Result<std::unique_ptr<Journal>> NewJournal() const;

  // A new Lifecycle over this Storage's orchestrator, state backend, broker and,
  // if `with_trigger`, trigger store (without it, every "watched" flag is true).
  Result<std::unique_ptr<Lifecycle>> NewLifecycle(bool with_trigger, TriggerContextNames names);
  // A new Lifecycle over `parts`. REQUIRES: they are ports of this Storage's
  // backend, URI and app id (on memory://, what the composite reads and writes
  // is the parts' own memory). kInvalidArgument for a missing required part.
  Result<std::unique_ptr<Lifecycle>> NewLifecycle(LifecycleParts parts, TriggerContextNames names);

  // A new port of type `Port` over this Storage: `mem(config)` on memory://,
  // `redis(client, config)` on redis://, `sqlite(database, config)` on sqlite://.
  // The port keeps the pool or database alive.
  template <typename Port, typename Mem, typename Redis, typename Sqlite>
  Result<std::unique_ptr<Port>> Make(Mem&& mem, Redis&& redis, Sqlite&& sqlite) const {
    switch (kind_) {
      case BackendKind::kMemory:
        return Result<std::unique_ptr<Port>>(mem(config_));
      case BackendKind::kRedis:
        return Result<std::unique_ptr<Port>>(redis(client_, config_));
      case BackendKind::kSqlite:
        break;
    }
    return Result<std::unique_ptr<Port>>(sqlite(db_, config_));
  }

 private:
  Storage(BackendConfig config, BackendKind kind);

  // The cached port in `slot`, made by `make` on first use. Made under the lock:
  // two first callers must not make two ports (on memory:// two stores).
  template <typename Port, typename MakeFn>
  Result<std::shared_ptr<Port>> Kept(std::shared_ptr<Port>& slot, MakeFn&& make)
      PYNENC_REQUIRES(mu_);

  const BackendConfig config_;
  const BackendKind kind_;
  std::shared_ptr<redis::Client> client_;  // redis:// only; set by Open
  std::shared_ptr<sqlite::Database> db_;   // sqlite:// only; set by Open
  Mutex mu_;
  std::shared_ptr<Broker> broker_ PYNENC_GUARDED_BY(mu_);
  std::shared_ptr<StateBackend> state_backend_ PYNENC_GUARDED_BY(mu_);
  std::shared_ptr<Orchestrator> orchestrator_ PYNENC_GUARDED_BY(mu_);
  std::shared_ptr<TriggerStore> trigger_store_ PYNENC_GUARDED_BY(mu_);
  std::shared_ptr<ClientDataStore> client_data_store_ PYNENC_GUARDED_BY(mu_);
};

}  // namespace pynenc_cpp
