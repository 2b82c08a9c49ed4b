// Factory of the Redis client data store (redis_client_data_store.cc): one HASH
// "data" under KeyPrefix(app_id, "client_data").
#pragma once

#include <memory>

#include "pynenc_cpp/ports/client_data_store.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis {

// Thread- and process-safe.
Result<std::unique_ptr<ClientDataStore>> NewRedisClientDataStore(std::shared_ptr<Client> client,
                                                                 const BackendConfig& config);

}  // namespace pynenc_cpp::redis
