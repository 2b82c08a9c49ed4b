// Redis generation source. Key layout and atomicity: redis_generation_source.h.
#include "redis/redis_generation_source.h"

#include <algorithm>
#include <charconv>

#include "ports/fencing.h"

namespace pynenc_cpp::redis {
namespace {

// KEYS: owners. ARGV: label, owner, min_term, largest term.
// Returns {1, term} after claiming {term, 0}, or {0, base} when base + 1 would
// pass the largest term (nothing written).
const Script kClaimTermScript(R"lua(
local current = 0
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored then
  local t = string.match(stored, '^(%d+):%d+:')
  if not t then return redis.error_reply('corrupt ownership record: ' .. stored) end
  current = tonumber(t)
end
local base = math.max(current, tonumber(ARGV[3]))
if base >= tonumber(ARGV[4]) then return {0, base} end
local term = base + 1
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d:0:', term) .. ARGV[2])
return {1, term}
)lua");

// KEYS: owners. ARGV: label, owner, expected term, expected seq.
// Returns {1, term, seq} after the grant; {0} when nothing is stored; {0, stored}
// when the stored ownership differs; {2, stored} when seq would overflow.
const Script kClaimSeqScript(R"lua(
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return {0} end
local t, s, o = string.match(stored, '^(%d+):(%d+):(.*)$')
if not t then return redis.error_reply('corrupt ownership record: ' .. stored) end
t = tonumber(t)
s = tonumber(s)
if o ~= ARGV[2] or t ~= tonumber(ARGV[3]) or s ~= tonumber(ARGV[4]) then return {0, stored} end
if s >= 4294967295 then return {2, stored} end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d:%d:', t, s + 1) .. o)
return {1, t, s + 1}
)lua");

// KEYS: specs, owners. Returns {label, spec, ownership or '', ...} (unsorted).
const Script kListScript(R"lua(
local specs = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #specs, 2 do
  out[#out + 1] = specs[i]
  out[#out + 1] = specs[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], specs[i]) or ''
end
return out
)lua");

bool ParseU32(std::string_view text, std::uint32_t* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// Decodes "<term>:<seq>:<owner>"; nullopt if malformed.
std::optional<Ownership> ParseOwnership(const std::string& record) {
  const auto first = record.find(':');
  if (first == std::string::npos) return std::nullopt;
  const auto second = record.find(':', first + 1);
  if (second == std::string::npos) return std::nullopt;
  Ownership out;
  out.owner = record.substr(second + 1);
  const std::string_view view(record);
  if (!ParseU32(view.substr(0, first), &out.generation.term) ||
      !ParseU32(view.substr(first + 1, second - first - 1), &out.generation.seq)) {
    return std::nullopt;
  }
  return out;
}

class RedisGenerationSource final : public GenerationSource {
 public:
  RedisGenerationSource(std::shared_ptr<Client> client, const BackendConfig& config)
      : client_(std::move(client)),
        owners_(KeyPrefix(config.app_id, keys::kGeneration) + keys::kOwners),
        specs_(KeyPrefix(config.app_id, keys::kGeneration) + keys::kSpecs) {}

  Result<Generation> ClaimTerm(const std::string& label, const std::string& owner,
                               std::uint32_t min_term) override {
    if (Status s = fencing::CheckSourceClaim(label, owner); !s.ok()) return s;
    Result<Value> r =
        client_->Eval(kClaimTermScript, {owners_},
                      {label, owner, std::to_string(min_term), std::to_string(kMaxGenerationTerm)});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure("claim a term of '" + label + "'", v.str);
    if (!IntArray(v, 2)) return client_->Unexpected("ClaimTerm");
    if (v.elements[0].integer == 0) {
      return Status::Conflict(
          "label '" + label + "': term " + std::to_string(v.elements[1].integer) +
          " + 1 would pass the largest term " + std::to_string(kMaxGenerationTerm));
    }
    const std::int64_t term = v.elements[1].integer;
    if (term <= 0 || term > kMaxGenerationTerm) return client_->Unexpected("ClaimTerm");
    return Generation{static_cast<std::uint32_t>(term), 0};
  }

  Result<Generation> ClaimSeq(const std::string& label, const std::string& owner,
                              Generation expected) override {
    if (Status s = fencing::CheckSourceClaim(label, owner); !s.ok()) return s;
    Result<Value> r =
        client_->Eval(kClaimSeqScript, {owners_},
                      {label, owner, std::to_string(expected.term), std::to_string(expected.seq)});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure("claim a seq of '" + label + "'", v.str);
    if (v.type != Value::Type::kArray || v.elements.empty() ||
        v.elements[0].type != Value::Type::kInt) {
      return client_->Unexpected("ClaimSeq");
    }
    const std::int64_t outcome = v.elements[0].integer;
    if (outcome == 1) {
      if (!IntArray(v, 3)) return client_->Unexpected("ClaimSeq");
      return Generation{static_cast<std::uint32_t>(v.elements[1].integer),
                        static_cast<std::uint32_t>(v.elements[2].integer)};
    }
    const std::string wanted = "label '" + label + "': expected owner '" + owner + "' at " +
                               expected.ToString() + ", but ";
    if (v.elements.size() == 1) return Status::Conflict(wanted + "nothing is stored");
    std::optional<Ownership> stored = ParseOwnership(v.elements[1].str);
    if (!stored) return Corrupt(v.elements[1].str);
    if (outcome == 2) {
      return Status::Conflict("label '" + label + "': seq of generation " +
                              stored->generation.ToString() + " would overflow");
    }
    return Status::Conflict(wanted + "stored is owner '" + stored->owner + "' at " +
                            stored->generation.ToString());
  }

  Result<std::optional<Ownership>> Current(const std::string& label) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    Result<Value> r = client_->Command({"HGET", owners_, label});
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return client_->Failure("HGET", r.value().str);
    if (r.value().is_nil()) return std::optional<Ownership>();
    std::optional<Ownership> stored = ParseOwnership(r.value().str);
    if (!stored) return Corrupt(r.value().str);
    return stored;
  }

  Status PutSpec(const std::string& label, const std::string& spec) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    return Simple({"HSET", specs_, label, spec});
  }

  Status RemoveSpec(const std::string& label) override {
    if (Status s = fencing::CheckSourceLabel(label); !s.ok()) return s;
    return Simple({"HDEL", specs_, label});
  }

  Result<std::vector<SpecRecord>> List() override {
    Result<Value> r = client_->Eval(kListScript, {specs_, owners_}, {});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure("list specs", v.str);
    if (v.type != Value::Type::kArray || v.elements.size() % 3 != 0) {
      return client_->Unexpected("List");
    }
    std::vector<SpecRecord> out;
    out.reserve(v.elements.size() / 3);
    for (std::size_t i = 0; i < v.elements.size(); i += 3) {
      SpecRecord record{v.elements[i].str, v.elements[i + 1].str, std::nullopt};
      if (!v.elements[i + 2].str.empty()) {
        record.ownership = ParseOwnership(v.elements[i + 2].str);
        if (!record.ownership) return Corrupt(v.elements[i + 2].str);
      }
      out.push_back(std::move(record));
    }
    std::sort(out.begin(), out.end(),
              [](const SpecRecord& a, const SpecRecord& b) { return a.label < b.label; });
    return out;
  }

  bool Shared() const override { return true; }

 private:
  static bool IntArray(const Value& v, std::size_t n) {
    if (v.type != Value::Type::kArray || v.elements.size() != n) return false;
    return std::all_of(v.elements.begin(), v.elements.end(),
                       [](const Value& e) { return e.type == Value::Type::kInt; });
  }

  Status Simple(const std::vector<std::string>& argv) const {
    Result<Value> r = client_->Command(argv);
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return client_->Failure(argv[0], r.value().str);
    return Status::Ok();
  }

  Status Corrupt(const std::string& record) const {
    return client_->Corrupt("corrupt ownership '" + record + "' in " + owners_);
  }

  const std::shared_ptr<Client> client_;
  const std::string owners_;
  const std::string specs_;
};

}  // namespace

Result<std::unique_ptr<GenerationSource>> NewRedisGenerationSource(std::shared_ptr<Client> client,
                                                                   const BackendConfig& config) {
  return std::unique_ptr<GenerationSource>(new RedisGenerationSource(std::move(client), config));
}

}  // namespace pynenc_cpp::redis
