// In-memory client data store: one hash map under one mutex.
#include "mem/mem_client_data_store.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <mutex>
#include <unordered_map>

namespace pynenc_cpp {
namespace {

class MemClientDataStore final : public ClientDataStore {
 public:
  Status Store(const std::string& key, const std::string& value) override {
    MutexLock lock(mu_);
    data_[key] = value;
    return Status::Ok();
  }
  Result<std::string> Retrieve(const std::string& key) override {
    MutexLock lock(mu_);
    auto it = data_.find(key);
    if (it == data_.end()) return Status::NotFound("client data key not found: " + key);
    return it->second;
  }
  Status Purge() override {
    MutexLock lock(mu_);
    data_.clear();
    return Status::Ok();
  }

 private:
  Mutex mu_;
  std::unordered_map<std::string, std::string> data_ PYNENC_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<ClientDataStore> NewMemClientDataStore(const BackendConfig&) {
  return std::make_unique<MemClientDataStore>();
}

}  // namespace pynenc_cpp
