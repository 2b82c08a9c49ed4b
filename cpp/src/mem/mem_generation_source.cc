// In-memory generation source: two ordered maps under one mutex.
#include "mem/mem_generation_source.h"
#include "pynenc_cpp/core/thread_annotations.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "ports/fencing.h"

namespace pynenc_cpp {
namespace {

class MemGenerationSource final : public GenerationSource {
 public:
  Result<Generation> ClaimTerm(const std::string& label, const std::string& owner,
                               std::uint32_t min_term) override {
    if (Status s = fencing::CheckSourceClaim(label, owner); !s.ok()) return s;
    MutexLock lock(mu_);
    auto it = owners_.find(label);
    const std::uint32_t current = it == owners_.end() ? 0 : it->second.generation.term;
    const std::uint32_t base = std::max(current, min_term);
    if (base >= kMaxGenerationTerm) {
      return Status::Conflict("label '" + label + "': term " + std::to_string(base) +
                              " + 1 would pass the largest term " +
                              std::to_string(kMaxGenerationTerm));
    }
    const Generation claimed{base + 1, 0};
    owners_[label] = Ownership{owner, claimed};
    return claimed;
  }

  Result<Generation> ClaimSeq(const std::string& label, const std::string& owner,
                              Generation expected) override {
    if (Status s = fencing::CheckSourceClaim(label, owner); !s.ok()) return s;
    MutexLock lock(mu_);
    auto it = owners_.find(label);
    const std::string wanted = "label '" + label + "': expected owner '" + owner + "' at " +
                               expected.ToString() + ", but ";
    if (it == owners_.end()) return Status::Conflict(wanted + "nothing is stored");
    Ownership& stored = it->second;
    if (stored.owner != owner || stored.generation != expected) {
      return Status::Conflict(wanted + "stored is owner '" + stored.owner + "' at " +
                              stored.generation.ToString());
    }
    if (stored.generation.seq == UINT32_MAX) {
      return Status::Conflict("label '" + label + "': seq of generation " +
                              stored.generation.ToString() + " would overflow");
    }
    ++stored.generation.seq;
    return stored.generation;
  }

  Result<std::optional<Ownership>> Current(const std::string& label) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    MutexLock lock(mu_);
    auto it = owners_.find(label);
    if (it == owners_.end()) return std::optional<Ownership>();
    return std::optional<Ownership>(it->second);
  }

  Status PutSpec(const std::string& label, const std::string& spec) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    MutexLock lock(mu_);
    specs_[label] = spec;
    return Status::Ok();
  }

  Status RemoveSpec(const std::string& label) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    MutexLock lock(mu_);
    specs_.erase(label);
    return Status::Ok();
  }

  Result<std::vector<SpecRecord>> List() override {
    MutexLock lock(mu_);
    std::vector<SpecRecord> out;
    out.reserve(specs_.size());
    for (const auto& [label, spec] : specs_) {
      SpecRecord record{label, spec, std::nullopt};
      if (auto it = owners_.find(label); it != owners_.end()) record.ownership = it->second;
      out.push_back(std::move(record));
    }
    return out;
  }

  bool Shared() const override { return false; }

 private:
  Mutex mu_;
  std::map<std::string, Ownership> owners_ PYNENC_GUARDED_BY(mu_);
  std::map<std::string, std::string> specs_ PYNENC_GUARDED_BY(mu_);  // ordered: List is sorted
};

}  // namespace

std::unique_ptr<GenerationSource> NewMemGenerationSource(const BackendConfig&) {
  return std::make_unique<MemGenerationSource>();
}

}  // namespace pynenc_cpp
