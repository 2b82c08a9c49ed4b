// In-memory journal: one hash map of entities under one mutex. An entity's
// entries are a vector (entry seq s at index s - 1).
#include "mem/mem_journal.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "ports/fencing.h"
#include "pynenc_cpp/ports/generation_source.h"

namespace pynenc_cpp {
namespace {

class MemJournal final : public Journal {
 public:
  Result<std::uint64_t> Append(const std::string& entity, std::uint64_t expected_seq,
                               std::uint64_t generation,
                               const std::vector<std::string>& events) override {
    if (Status s = fencing::CheckAppend(entity, generation, events); !s.ok()) return s;
    MutexLock lock(mu_);
    const Entity& current = Find(entity);
    if (generation < current.fence) return fencing::StaleEntity(entity, generation, current.fence);
    if (current.entries.size() != expected_seq) {
      return fencing::SequenceConflict(entity, current.entries.size(), expected_seq);
    }
    Entity& e = entities_[entity];
    for (const std::string& payload : events) {
      e.entries.push_back(JournalEntry{e.entries.size() + 1, generation, payload});
    }
    e.fence = generation;
    return std::uint64_t{e.entries.size()};
  }

  Result<std::uint64_t> Fence(const std::string& entity, std::uint64_t generation) override {
    if (Status s = fencing::CheckEntityWrite(entity, generation); !s.ok()) return s;
    MutexLock lock(mu_);
    const Entity& current = Find(entity);
    if (generation < current.fence) return fencing::StaleEntity(entity, generation, current.fence);
    Entity& e = entities_[entity];
    e.fence = generation;
    return std::uint64_t{e.entries.size()};
  }

  Result<std::vector<JournalEntry>> Read(const std::string& entity, std::uint64_t after_seq,
                                         std::size_t limit) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    MutexLock lock(mu_);
    std::vector<JournalEntry> out;
    const std::vector<JournalEntry>& entries = Find(entity).entries;
    if (after_seq >= entries.size()) return out;
    const std::size_t available = entries.size() - after_seq;
    const std::size_t n = limit == 0 ? available : std::min(limit, available);
    out.assign(entries.begin() + static_cast<std::ptrdiff_t>(after_seq),
               entries.begin() + static_cast<std::ptrdiff_t>(after_seq + n));
    return out;
  }

  Result<std::uint64_t> LastSeq(const std::string& entity) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    MutexLock lock(mu_);
    return std::uint64_t{Find(entity).entries.size()};
  }

  Result<std::uint64_t> FenceOf(const std::string& entity) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    MutexLock lock(mu_);
    return Find(entity).fence;
  }

  Status SaveSnapshot(const std::string& entity, std::uint64_t seq, std::uint64_t generation,
                      const std::string& state) override {
    if (Status s = fencing::CheckEntityWrite(entity, generation); !s.ok()) return s;
    MutexLock lock(mu_);
    const Entity& current = Find(entity);
    if (generation < current.fence) return fencing::StaleEntity(entity, generation, current.fence);
    if (seq > current.entries.size()) {
      return Status::InvalidArgument("journal: snapshot at sequence " + std::to_string(seq) +
                                     " of entity '" + entity + "' is past its last sequence " +
                                     std::to_string(current.entries.size()));
    }
    if (current.snapshot && current.snapshot->seq > seq) return Status::Ok();  // older: ignored
    Entity& e = entities_[entity];
    e.snapshot = JournalSnapshot{seq, generation, state};
    e.fence = generation;
    return Status::Ok();
  }

  Result<std::optional<JournalSnapshot>> LoadSnapshot(const std::string& entity) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    MutexLock lock(mu_);
    return Find(entity).snapshot;
  }

 private:
  struct Entity {
    std::vector<JournalEntry> entries;
    std::uint64_t fence = 0;
    std::optional<JournalSnapshot> snapshot;
  };

  // The entity, or an empty one (not inserted: failed calls leave no trace).
  const Entity& Find(const std::string& entity) const PYNENC_REQUIRES(mu_) {
    static const Entity kNone;
    auto it = entities_.find(entity);
    return it == entities_.end() ? kNone : it->second;
  }

  Mutex mu_;
  std::unordered_map<std::string, Entity> entities_ PYNENC_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Journal> NewMemJournal(const BackendConfig&) {
  return std::make_unique<MemJournal>();
}

}  // namespace pynenc_cpp
