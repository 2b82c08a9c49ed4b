// ClientDataStore port: a key -> serialized value map for large task arguments,
// results and exceptions. Maps pynenc's BaseClientDataStore: _store -> Store,
// _retrieve -> Retrieve, _purge -> Purge.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <memory>
#include <string>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp {

class ClientDataStore {
 public:
  ClientDataStore() = default;
  ClientDataStore(const ClientDataStore&) = delete;
  ClientDataStore& operator=(const ClientDataStore&) = delete;
  virtual ~ClientDataStore() = default;

  // Stores `value` under `key`, replacing any previous value.
  virtual Status Store(const std::string& key, const std::string& value) = 0;
  // The value under `key`; kNotFound if there is none.
  virtual Result<std::string> Retrieve(const std::string& key) = 0;
  // Removes every key of this app.
  virtual Status Purge() = 0;
};

// Opens the store named by `config.uri`. kBadConfig for an unusable URI.
Result<std::unique_ptr<ClientDataStore>> OpenClientDataStore(const BackendConfig& config);

}  // namespace pynenc_cpp
