// In-memory fenced store: one hash map under one mutex. A tombstone (after
// Delete) is an entry without a value that keeps the key's generation.
#include "mem/mem_fenced_store.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <mutex>
#include <optional>
#include <unordered_map>

#include "ports/fencing.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp {
namespace {

class MemFencedStore final : public FencedStore {
 public:
  Status Write(const std::string& key, const std::string& value,
               std::uint64_t generation) override {
    return Put(key, value, generation);
  }

  Result<std::optional<FencedValue>> Read(const std::string& key) override {
    if (key.empty()) return Status::InvalidArgument("fenced store: key must not be empty");
    MutexLock lock(mu_);
    auto it = data_.find(key);
    if (it == data_.end() || !it->second.value) return std::optional<FencedValue>();
    return std::optional<FencedValue>(FencedValue{*it->second.value, it->second.generation});
  }

  Status Delete(const std::string& key, std::uint64_t generation) override {
    return Put(key, std::nullopt, generation);
  }

 private:
  struct Entry {
    std::optional<std::string> value;  // nullopt: a tombstone
    std::uint64_t generation = 0;      // of the last accepted write or delete
  };

  // Stores `value` (nullopt: a tombstone) stamped with `generation` unless the
  // key's stored generation is above it.
  Status Put(const std::string& key, std::optional<std::string> value, std::uint64_t generation) {
    if (Status s = fencing::CheckKeyWrite(key, generation); !s.ok()) return s;
    MutexLock lock(mu_);
    auto [it, inserted] = data_.try_emplace(key);
    if (!inserted && it->second.generation > generation) {
      return fencing::StaleKey(key, generation, it->second.generation);
    }
    it->second = Entry{std::move(value), generation};
    return Status::Ok();
  }

  Mutex mu_;
  std::unordered_map<std::string, Entry> data_ PYNENC_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<FencedStore> NewMemFencedStore(const BackendConfig&) {
  return std::make_unique<MemFencedStore>();
}

}  // namespace pynenc_cpp
