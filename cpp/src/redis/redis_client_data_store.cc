// Redis client data store: one HASH "data" under KeyPrefix(app_id, "client_data").
#include "redis/redis_client_data_store.h"

#include <string>
#include <utility>

namespace pynenc_cpp::redis {
namespace {

Status Failed(const Client& client, const std::string& what, const Value& v) {
  return client.Failure(what, v.str);
}

class RedisClientDataStore final : public ClientDataStore {
 public:
  RedisClientDataStore(std::shared_ptr<Client> client, const BackendConfig& config)
      : client_(std::move(client)),
        key_(KeyPrefix(config.app_id, keys::kClientData) + keys::kData) {}

  Status Store(const std::string& key, const std::string& value) override {
    Result<Value> r = client_->Command({"HSET", key_, key, value});
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return Failed(*client_, "HSET", r.value());
    return Status::Ok();
  }

  Result<std::string> Retrieve(const std::string& key) override {
    Result<Value> r = client_->Command({"HGET", key_, key});
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return Failed(*client_, "HGET", r.value());
    if (r.value().is_nil()) return Status::NotFound("client data key not found: " + key);
    return std::move(r.value().str);
  }

  Status Purge() override {
    Result<Value> r = client_->Command({"DEL", key_});
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return Failed(*client_, "DEL", r.value());
    return Status::Ok();
  }

 private:
  const std::shared_ptr<Client> client_;
  const std::string key_;
};

}  // namespace

Result<std::unique_ptr<ClientDataStore>> NewRedisClientDataStore(std::shared_ptr<Client> client,
                                                                 const BackendConfig& config) {
  return std::unique_ptr<ClientDataStore>(new RedisClientDataStore(std::move(client), config));
}

}  // namespace pynenc_cpp::redis
