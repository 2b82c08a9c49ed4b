// Redis fenced store. Key layout and atomicity: redis_fenced_store.h.
#include "redis/redis_fenced_store.h"

#include <charconv>

#include "ports/fencing.h"
#include "pynenc_cpp/ports/generation_source.h"
#include "redis/redis_fence_lua.h"

namespace pynenc_cpp::redis {
namespace {

// The compare both scripts start with: when the stored generation (of a value
// or of a tombstone: both keep term and seq) is above the
// given {ARGV[1] = term, ARGV[2] = seq}, returns {0, stored term, stored seq}
// (nothing written).
const std::string kFenceLua = FenceLua(1, "generation");

// KEYS: the key's hash. ARGV: term, seq, value. Returns {1} when written.
const Script kWriteScript(kFenceLua + R"lua(
redis.call('HSET', KEYS[1], 'value', ARGV[3], 'term', ARGV[1], 'seq', ARGV[2])
return {1}
)lua");

// KEYS: the key's hash. ARGV: term, seq. Leaves a tombstone (the hash without
// its value field, stamped with the given generation) whether a value was
// stored or not. Returns {1} when done.
const Script kDeleteScript(kFenceLua + R"lua(
redis.call('HDEL', KEYS[1], 'value')
redis.call('HSET', KEYS[1], 'term', ARGV[1], 'seq', ARGV[2])
return {1}
)lua");

bool ParseU32(const std::string& text, std::uint32_t* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

class RedisFencedStore final : public FencedStore {
 public:
  RedisFencedStore(std::shared_ptr<Client> client, const BackendConfig& config)
      : client_(std::move(client)), prefix_(KeyPrefix(config.app_id, keys::kFenced) + keys::kV) {}

  Status Write(const std::string& key, const std::string& value,
               std::uint64_t generation) override {
    if (Status s = fencing::CheckKeyWrite(key, generation); !s.ok()) return s;
    const Generation g = Generation::FromPacked(generation);
    return Fenced(kWriteScript, "write", key, generation,
                  {std::to_string(g.term), std::to_string(g.seq), value});
  }

  Result<std::optional<FencedValue>> Read(const std::string& key) override {
    if (key.empty()) return Status::InvalidArgument("fenced store: key must not be empty");
    Result<Value> r = client_->Command({"HMGET", prefix_ + key, "value", "term", "seq"});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure("read '" + key + "'", v.str);
    if (v.type != Value::Type::kArray || v.elements.size() != 3) {
      return client_->Unexpected("HMGET");
    }
    if (v.elements[0].is_nil()) return std::optional<FencedValue>();  // absent or tombstone
    Generation g;
    if (!ParseU32(v.elements[1].str, &g.term) || !ParseU32(v.elements[2].str, &g.seq)) {
      return client_->Corrupt("corrupt generation for fenced key '" + key + "'");
    }
    return std::optional<FencedValue>(FencedValue{v.elements[0].str, g.Packed()});
  }

  Status Delete(const std::string& key, std::uint64_t generation) override {
    if (Status s = fencing::CheckKeyWrite(key, generation); !s.ok()) return s;
    const Generation g = Generation::FromPacked(generation);
    return Fenced(kDeleteScript, "delete", key, generation,
                  {std::to_string(g.term), std::to_string(g.seq)});
  }

 private:
  Status Fenced(const Script& script, const std::string& what, const std::string& key,
                std::uint64_t generation, const std::vector<std::string>& args) const {
    Result<Value> r = client_->Eval(script, {prefix_ + key}, args);
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure(what + " '" + key + "'", v.str);
    if (v.type != Value::Type::kArray || v.elements.empty()) return client_->Unexpected(what);
    for (const Value& e : v.elements) {
      if (e.type != Value::Type::kInt) return client_->Unexpected(what);
    }
    if (v.elements[0].integer == 1) return Status::Ok();
    if (v.elements.size() != 3) return client_->Unexpected(what);
    const Generation stored{static_cast<std::uint32_t>(v.elements[1].integer),
                            static_cast<std::uint32_t>(v.elements[2].integer)};
    return fencing::StaleKey(key, generation, stored.Packed());
  }


  const std::shared_ptr<Client> client_;
  const std::string prefix_;  // + key: the key's hash
};

}  // namespace

Result<std::unique_ptr<FencedStore>> NewRedisFencedStore(std::shared_ptr<Client> client,
                                                         const BackendConfig& config) {
  return std::unique_ptr<FencedStore>(new RedisFencedStore(std::move(client), config));
}

}  // namespace pynenc_cpp::redis
