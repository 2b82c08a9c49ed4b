// Redis journal. Key layout and atomicity: redis_journal.h.
#include "redis/redis_journal.h"

#include <charconv>
#include <limits>

#include "ports/fencing.h"
#include "pynenc_cpp/ports/generation_source.h"
#include "redis/redis_fence_lua.h"

namespace pynenc_cpp::redis {
namespace {

// The compare every writing script starts with. KEYS[2]: the fence hash. When
// the fence is above the given {ARGV[1] = term, ARGV[2] = seq}, returns
// {0, fence term, fence seq} (nothing written).
const std::string kFenceLua = FenceLua(2, "fence");

// KEYS: log, fence. ARGV: term, seq, expected seq, entries (already encoded).
// Returns {1, last seq} when appended; {2, last seq} when the log is not at the
// expected seq (nothing written).
const Script kAppendScript(kFenceLua + R"lua(
local last = redis.call('LLEN', KEYS[1])
if last ~= tonumber(ARGV[3]) then return {2, last} end
for i = 4, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[2], 'term', ARGV[1], 'seq', ARGV[2])
return {1, redis.call('LLEN', KEYS[1])}
)lua");

// KEYS: log, fence. ARGV: term, seq. Returns {1, last seq} when fenced.
const Script kFenceScript(kFenceLua + R"lua(
redis.call('HSET', KEYS[2], 'term', ARGV[1], 'seq', ARGV[2])
return {1, redis.call('LLEN', KEYS[1])}
)lua");

// KEYS: log, fence, snapshot. ARGV: term, seq, entry seq, state. Returns {1}
// when stored, {3} when a newer snapshot is kept (nothing written), {2, last
// seq} when the entry seq is past the log's end (nothing written).
const Script kSnapshotScript(kFenceLua + R"lua(
local last = redis.call('LLEN', KEYS[1])
local at = tonumber(ARGV[3])
if at > last then return {2, last} end
local stored = redis.call('HGET', KEYS[3], 'at')
if stored and tonumber(stored) > at then return {3} end
redis.call('HSET', KEYS[3], 'at', ARGV[3], 'term', ARGV[1], 'seq', ARGV[2], 'state', ARGV[4])
redis.call('HSET', KEYS[2], 'term', ARGV[1], 'seq', ARGV[2])
return {1}
)lua");

constexpr std::uint64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

template <typename T>
bool ParseNumber(std::string_view text, T* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool ParseGeneration(const Value& term, const Value& seq, std::uint64_t* out) {
  Generation g;
  if (!ParseNumber(term.str, &g.term) || !ParseNumber(seq.str, &g.seq)) return false;
  *out = g.Packed();
  return true;
}

// Decodes "<term>:<seq>:<payload>"; false if malformed.
bool ParseEntry(const std::string& record, JournalEntry* out) {
  const auto first = record.find(':');
  if (first == std::string::npos) return false;
  const auto second = record.find(':', first + 1);
  if (second == std::string::npos) return false;
  const std::string_view view(record);
  Generation g;
  if (!ParseNumber(view.substr(0, first), &g.term) ||
      !ParseNumber(view.substr(first + 1, second - first - 1), &g.seq)) {
    return false;
  }
  out->generation = g.Packed();
  out->payload = record.substr(second + 1);
  return true;
}

class RedisJournal final : public Journal {
 public:
  RedisJournal(std::shared_ptr<Client> client, const BackendConfig& config)
      : client_(std::move(client)), prefix_(KeyPrefix(config.app_id, keys::kJournal)) {}

  Result<std::uint64_t> Append(const std::string& entity, std::uint64_t expected_seq,
                               std::uint64_t generation,
                               const std::vector<std::string>& events) override {
    if (Status s = fencing::CheckAppend(entity, generation, events); !s.ok()) return s;
    const Generation g = Generation::FromPacked(generation);
    const std::string header = std::to_string(g.term) + ":" + std::to_string(g.seq) + ":";
    std::vector<std::string> args = {std::to_string(g.term), std::to_string(g.seq),
                                     std::to_string(expected_seq)};
    args.reserve(3 + events.size());
    for (const std::string& payload : events) args.push_back(header + payload);
    Result<Value> r = client_->Eval(kAppendScript, {Log(entity), FenceKey(entity)}, args);
    Result<std::int64_t> last = Outcome(r, "append to", entity, generation);
    if (!last.ok()) return last.status();
    if (last.value() < 0 || (Code(r.value()) != 1 && Code(r.value()) != 2)) {
      return client_->Unexpected("append");
    }
    if (Code(r.value()) == 2) {
      return fencing::SequenceConflict(entity, last.value(), expected_seq);
    }
    return static_cast<std::uint64_t>(last.value());
  }

  Result<std::uint64_t> Fence(const std::string& entity, std::uint64_t generation) override {
    if (Status s = fencing::CheckEntityWrite(entity, generation); !s.ok()) return s;
    const Generation g = Generation::FromPacked(generation);
    Result<Value> r = client_->Eval(kFenceScript, {Log(entity), FenceKey(entity)},
                                    {std::to_string(g.term), std::to_string(g.seq)});
    Result<std::int64_t> last = Outcome(r, "fence", entity, generation);
    if (!last.ok()) return last.status();
    if (last.value() < 0 || Code(r.value()) != 1) return client_->Unexpected("fence");
    return static_cast<std::uint64_t>(last.value());
  }

  Result<std::vector<JournalEntry>> Read(const std::string& entity, std::uint64_t after_seq,
                                         std::size_t limit) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    std::vector<JournalEntry> out;
    if (after_seq >= kInt64Max) return out;  // no seq is above it
    // Entry seq s is at index s - 1: entries after `after_seq` start at index after_seq.
    const std::int64_t stop = (limit == 0 || limit > kInt64Max - after_seq)
                                  ? std::int64_t{-1}
                                  : static_cast<std::int64_t>(after_seq + limit - 1);
    Result<Value> r =
        client_->Command({"LRANGE", Log(entity), std::to_string(after_seq), std::to_string(stop)});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure("read '" + entity + "'", v.str);
    if (v.type != Value::Type::kArray) return client_->Unexpected("LRANGE");
    out.resize(v.elements.size());
    for (std::size_t i = 0; i < v.elements.size(); ++i) {
      out[i].seq = after_seq + i + 1;
      if (!ParseEntry(v.elements[i].str, &out[i])) return Corrupt("entry", entity);
    }
    return out;
  }

  Result<std::uint64_t> LastSeq(const std::string& entity) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    Result<Value> r = client_->Command({"LLEN", Log(entity)});
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return client_->Failure("LLEN '" + entity + "'", r.value().str);
    if (r.value().type != Value::Type::kInt || r.value().integer < 0) {
      return client_->Unexpected("LLEN");
    }
    return static_cast<std::uint64_t>(r.value().integer);
  }

  Result<std::uint64_t> FenceOf(const std::string& entity) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    Result<Value> r = client_->Command({"HMGET", FenceKey(entity), "term", "seq"});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure("read the fence of '" + entity + "'", v.str);
    if (v.type != Value::Type::kArray || v.elements.size() != 2) {
      return client_->Unexpected("HMGET");
    }
    if (v.elements[0].is_nil()) return std::uint64_t{0};
    std::uint64_t fence = 0;
    if (!ParseGeneration(v.elements[0], v.elements[1], &fence)) return Corrupt("fence", entity);
    return fence;
  }

  Status SaveSnapshot(const std::string& entity, std::uint64_t seq, std::uint64_t generation,
                      const std::string& state) override {
    if (Status s = fencing::CheckEntityWrite(entity, generation); !s.ok()) return s;
    const Generation g = Generation::FromPacked(generation);
    Result<Value> r =
        client_->Eval(kSnapshotScript, {Log(entity), FenceKey(entity), Snap(entity)},
                      {std::to_string(g.term), std::to_string(g.seq), std::to_string(seq), state});
    Result<std::int64_t> last = Outcome(r, "snapshot", entity, generation);
    if (!last.ok()) return last.status();
    if (Code(r.value()) != 1 && Code(r.value()) != 2 && Code(r.value()) != 3) {
      return client_->Unexpected("snapshot");
    }
    if (Code(r.value()) == 2) {
      return Status::InvalidArgument("journal: snapshot at sequence " + std::to_string(seq) +
                                     " of entity '" + entity + "' is past its last sequence " +
                                     std::to_string(last.value()));
    }
    return Status::Ok();  // stored (1) or older than the stored one (3)
  }

  Result<std::optional<JournalSnapshot>> LoadSnapshot(const std::string& entity) override {
    if (Status s = fencing::CheckEntity(entity); !s.ok()) return s;
    Result<Value> r = client_->Command({"HMGET", Snap(entity), "at", "term", "seq", "state"});
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure("load the snapshot of '" + entity + "'", v.str);
    if (v.type != Value::Type::kArray || v.elements.size() != 4) {
      return client_->Unexpected("HMGET");
    }
    if (v.elements[0].is_nil()) return std::optional<JournalSnapshot>();
    JournalSnapshot snapshot;
    if (!ParseNumber(v.elements[0].str, &snapshot.seq) ||
        !ParseGeneration(v.elements[1], v.elements[2], &snapshot.generation) ||
        v.elements[3].is_nil()) {
      return Corrupt("snapshot", entity);
    }
    snapshot.state = v.elements[3].str;
    return std::optional<JournalSnapshot>(std::move(snapshot));
  }

 private:
  std::string Log(const std::string& entity) const { return prefix_ + keys::kLog + entity; }
  std::string FenceKey(const std::string& entity) const { return prefix_ + keys::kFence + entity; }
  std::string Snap(const std::string& entity) const { return prefix_ + keys::kSnap + entity; }

  // The first integer of a script's reply. REQUIRES: Outcome accepted the reply.
  static std::int64_t Code(const Value& v) { return v.elements[0].integer; }

  // Checks a script's reply: a Redis error is kBackendFailure, {0, term, seq}
  // kStaleGeneration. Otherwise the reply's second integer (-1 if it has none).
  Result<std::int64_t> Outcome(const Result<Value>& r, const std::string& what,
                               const std::string& entity, std::uint64_t generation) const {
    if (!r.ok()) return r.status();
    const Value& v = r.value();
    if (v.is_error()) return client_->Failure(what + " '" + entity + "'", v.str);
    if (v.type != Value::Type::kArray || v.elements.empty() || v.elements.size() > 3) {
      return client_->Unexpected(what);
    }
    for (const Value& e : v.elements) {
      if (e.type != Value::Type::kInt) return client_->Unexpected(what);
    }
    if (Code(v) == 0) {
      if (v.elements.size() != 3) return client_->Unexpected(what);
      const Generation fence{static_cast<std::uint32_t>(v.elements[1].integer),
                             static_cast<std::uint32_t>(v.elements[2].integer)};
      return fencing::StaleEntity(entity, generation, fence.Packed());
    }
    return v.elements.size() > 1 ? v.elements[1].integer : std::int64_t{-1};
  }

  Status Corrupt(const std::string& what, const std::string& entity) const {
    return client_->Corrupt("corrupt " + what + " for journal entity '" + entity + "'");
  }

  const std::shared_ptr<Client> client_;
  const std::string prefix_;  // + keys::kLog / kFence / kSnap + entity
};

}  // namespace

Result<std::unique_ptr<Journal>> NewRedisJournal(std::shared_ptr<Client> client,
                                                 const BackendConfig& config) {
  return std::unique_ptr<Journal>(new RedisJournal(std::move(client), config));
}

}  // namespace pynenc_cpp::redis
