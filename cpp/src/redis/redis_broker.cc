// Redis broker (reliable dequeue with leases and recovery, server-side blocking
// waits). Key layout and protocol: redis_broker.h; the Lua scripts it runs:
// redis_broker_scripts.cc.
#include "redis/redis_broker.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "ports/consumer_id.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "redis/redis_broker_scripts.h"

namespace pynenc_cpp::redis {
namespace {

using broker_scripts::kPopScript;
using broker_scripts::kPurgeScript;
using broker_scripts::kRequeueScript;
using broker_scripts::kRouteScript;

Status ReplyError(const Client& client, const std::string& what, const Value& v) {
  return client.Failure(what, v.str);
}

class RedisBroker final : public Broker {
 public:
  RedisBroker(std::shared_ptr<Client> client, const BackendConfig& config,
              const RedisBrokerOptions& options)
      : client_(std::move(client)),
        options_(options),
        prefix_(KeyPrefix(config.app_id, keys::kBroker)),
        consumer_(broker_ids::NewConsumerId()),
        consumer_pid_(getpid()) {}

  ~RedisBroker() override {
    if (!registered_.load()) return;
    // Clean close: deliveries handed to callers are acknowledged; any other
    // processing entry goes back to its queue. If that fails, the lease lapses
    // and another consumer's recovery redelivers everything instead.
    Result<Value> requeued = RequeueUnknown();
    if (!requeued.ok() || requeued.value().is_error()) return;
    const std::string consumer = Consumer();
    (void)client_->Pipeline({{"DEL", prefix_ + keys::kProc + consumer},
                             {"SREM", prefix_ + keys::kConsumers, consumer},
                             {"DEL", prefix_ + keys::kLease + consumer},
                             {"DEL", InterruptKey()}});
  }

  Status Route(const std::vector<InvocationId>& ids, const std::string& queue,
               double priority) override {
    if (ids.empty()) return Status::Ok();
    std::vector<std::string> args{prefix_, BrokerScore(priority), queue,
                                  std::to_string(options_.wake_token_bound)};
    args.reserve(ids.size() + 4);
    for (const InvocationId& id : ids) args.push_back(id.str());
    Result<Value> r = client_->Eval(kRouteScript, {prefix_ + keys::kSeq}, args);
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return ReplyError(*client_, "route to '" + queue + "'", r.value());
    return Status::Ok();
  }

  Result<std::optional<InvocationId>> Retrieve(const std::string& queue,
                                               std::int64_t timeout_ms) override {
    Result<std::optional<PoppedThen>> got = RetrieveWith(queue, timeout_ms, nullptr);
    if (!got.ok()) return got.status();
    if (!got.value()) return std::optional<InvocationId>();
    return std::optional<InvocationId>(std::move(got.value()->id));
  }

  // Retrieve where every pop attempt is `then`'s script (nullptr: the plain pop).
  Result<std::optional<PoppedThen>> RetrieveWith(const std::string& queue, std::int64_t timeout_ms,
                                                 const PopThen* then) {
    const std::uint64_t epoch = interrupt_epoch_.load();
    if (then != nullptr) {
      Result<std::optional<PoppedThen>> recovered = ResolveLostAttempt();
      if (!recovered.ok() || recovered.value()) return recovered;
    }
    Result<std::optional<PoppedThen>> got = PopOnce(queue, TakeAcks(), true, then);
    if (!got.ok() || got.value() || timeout_ms <= 0) return got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    const std::string wake = WakeKey(queue);
    while (true) {
      if (interrupt_epoch_.load() != epoch) return std::optional<PoppedThen>();
      const std::int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count();
      if (left <= 0) return std::optional<PoppedThen>();
      // A third of the lease at most: the pop after each slice refreshes it.
      const std::int64_t slice = std::max<std::int64_t>(
          1, std::min({left, options_.wake_slice_ms, options_.lease_ms / 3}));
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%.3f", static_cast<double>(slice) / 1000.0);
      // Counted before the epoch is read again: an Interrupt either sees this
      // wait counted (and pushes a token for it) or this check sees its epoch.
      blocked_.fetch_add(1);
      if (interrupt_epoch_.load() != epoch) {
        blocked_.fetch_sub(1);
        return std::optional<PoppedThen>();
      }
      Result<Value> token =
          client_->BlockingCommand({"BLPOP", wake, InterruptKey(), seconds}, slice);
      blocked_.fetch_sub(1);
      if (!token.ok()) return token.status();
      if (token.value().is_error()) return ReplyError(*client_, "BLPOP", token.value());
      // {key, element}: a wake token of the queue, or an interrupt token (this
      // object's own list; a stale one, pushed for a wait that ended first, only
      // costs this extra turn of the loop).
      const Value& reply = token.value();
      const bool took_token = reply.type == Value::Type::kArray && !reply.elements.empty() &&
                              reply.elements[0].str == wake;
      if (interrupt_epoch_.load() != epoch) {
        if (took_token) (void)client_->Command({"RPUSH", wake, "1"});  // leave it for others
        return std::optional<PoppedThen>();
      }
      got = PopOnce(queue, {}, !took_token, then);
      if (!got.ok() || got.value()) return got;
    }
  }

  Result<std::int64_t> Count(const std::vector<std::string>& queues) override {
    if (queues.empty()) return std::int64_t{0};
    std::vector<std::vector<std::string>> cmds;
    cmds.reserve(queues.size());
    for (const std::string& q : queues) cmds.push_back({"ZCARD", QueueKey(q)});
    Result<std::vector<Value>> r = client_->Pipeline(cmds);
    if (!r.ok()) return r.status();
    std::int64_t total = 0;
    for (const Value& v : r.value()) {
      if (v.is_error()) return ReplyError(*client_, "ZCARD", v);
      total += v.integer;
    }
    return total;
  }

  Status Purge() override {
    Result<Value> r = client_->Eval(
        kPurgeScript, {prefix_ + keys::kQueues, prefix_ + keys::kConsumers}, {prefix_});
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return ReplyError(*client_, "purge", r.value());
    MutexLock lock(mu_);
    unacked_.clear();
    return Status::Ok();
  }

  // Ends every Retrieve of this object now waiting: a token per waiting call on
  // its own interrupt list, which each BLPOP watches beside the queue's wake
  // list (so a wait's slice can be long; an idle worker wakes once a slice).
  // Returns at once: the push is made by a thread of its own, so a stop never
  // waits on the server (a hung one would hold it for the I/O timeout). Best
  // effort: while a push is under way another is not started, and if the push
  // fails those waits end with their slice (a runner interrupts again while a
  // worker still waits: RunnerEngine).
  void Interrupt() override {
    interrupt_epoch_.fetch_add(1);
    const int waiting = blocked_.load();
    if (waiting <= 0 || pushing_->exchange(true)) return;
    std::vector<std::string> push{"RPUSH", InterruptKey()};
    push.insert(push.end(), static_cast<std::size_t>(waiting), "1");
    std::vector<std::vector<std::string>> commands{
        std::move(push), {"PEXPIRE", InterruptKey(), std::to_string(kInterruptTokenTtlMs)}};
    try {
      std::thread([client = client_, pushing = pushing_, commands = std::move(commands)] {
        (void)client->Pipeline(commands);
        pushing->store(false);
      }).detach();
    } catch (const std::system_error&) {
      pushing_->store(false);  // no thread: the waits end with their slice
    }
  }

 private:
  // Unconsumed interrupt tokens (a wait that ended by itself first) expire.
  static constexpr std::int64_t kInterruptTokenTtlMs = 60'000;

  std::string Consumer() const {
    MutexLock lock(consumer_mu_);
    if (consumer_pid_ != getpid()) {  // forked since: a consumer of its own
      consumer_ = broker_ids::NewConsumerId();
      consumer_pid_ = getpid();
      // Whose lease the parent renewed is not this consumer's: its first pop
      // takes a lease and lists it, or what it pops could never be recovered.
      last_lease_ms_.store(kNever);
    }
    return consumer_;
  }
  std::string InterruptKey() const { return prefix_ + keys::kIntr + Consumer(); }
  std::string QueueKey(const std::string& queue) const { return prefix_ + keys::kQ + queue; }
  std::string WakeKey(const std::string& queue) const { return prefix_ + keys::kW + queue; }

  // The calling thread's deliveries not yet acknowledged (removed from the map).
  std::vector<std::string> TakeAcks() {
    MutexLock lock(mu_);
    auto it = unacked_.find(std::this_thread::get_id());
    if (it == unacked_.end()) return {};
    std::vector<std::string> out = std::move(it->second);
    unacked_.erase(it);
    return out;
  }

  void Remember(std::vector<std::string> entries) {
    if (entries.empty()) return;
    MutexLock lock(mu_);
    auto& mine = unacked_[std::this_thread::get_id()];
    mine.insert(mine.end(), std::make_move_iterator(entries.begin()),
                std::make_move_iterator(entries.end()));
  }

  // Runs kRequeueScript with every delivery of this object still held by a
  // caller (`acks`: the calling thread's, being acknowledged).
  Result<Value> RequeueUnknown(const std::vector<std::string>& acks = {}) {
    std::vector<std::string> args{prefix_};
    args.insert(args.end(), acks.begin(), acks.end());
    {
      MutexLock lock(mu_);
      for (const auto& [thread, entries] : unacked_) {
        args.insert(args.end(), entries.begin(), entries.end());
      }
    }
    return client_->Eval(kRequeueScript, {prefix_ + keys::kProc + Consumer()}, args);
  }

  // This thread's record of its last combined attempt (see PopOnce).
  std::string TookKey() const {
    std::ostringstream thread;
    thread << std::this_thread::get_id();
    return prefix_ + keys::kTook + Consumer() + ":" + thread.str();
  }

  // A combined attempt of this thread whose reply was lost: what its script
  // recorded, read back. nullopt when there is none, or it never ran (its pop,
  // if any, is requeued with the unknown entries). An error leaves it pending.
  Result<std::optional<PoppedThen>> ResolveLostAttempt() {
    std::string token;
    {
      MutexLock lock(mu_);
      auto it = lost_.find(std::this_thread::get_id());
      if (it == lost_.end()) return std::optional<PoppedThen>();
      token = it->second;
    }
    Result<Value> r = client_->Command({"GET", TookKey()});
    if (!r.ok()) return r.status();
    if (r.value().is_error()) return ReplyError(*client_, "GET", r.value());
    {
      MutexLock lock(mu_);
      lost_.erase(std::this_thread::get_id());
    }
    // <16 hex token><mark><8-digit id length><id><processing entry>
    const std::string& v = r.value().str;
    if (r.value().is_nil() || v.size() < 25 || v.compare(0, 16, token) != 0) {
      return std::optional<PoppedThen>();
    }
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(v.data() + 17, v.data() + 25, n);
    if (ec != std::errc() || end != v.data() + 25 || v.size() < 25 + n) {
      return client_->Corrupt("malformed record of a retrieve");
    }
    if (v.size() > 25 + n) Remember({v.substr(25 + n)});  // '' : owned, nothing to acknowledge
    PoppedThen out{InvocationId(v.substr(25, n)), std::nullopt, v[16]};
    return std::optional<PoppedThen>(std::move(out));
  }

  // One pop attempt (acknowledging `acks`, refreshing the lease, maybe
  // recovering). With `then`, the attempt is its script: the pop's arguments,
  // a fresh attempt token and their count follow the script's own, and the
  // script records what it did under TookKey() so a lost reply can be resolved.
  Result<std::optional<PoppedThen>> PopOnce(const std::string& queue, std::vector<std::string> acks,
                                            bool consume_token, const PopThen* then) {
    if (suspect_.exchange(false)) {
      // A previous pop lost its connection: it may have moved an item that no
      // caller received. (A pop racing in another thread may be requeued too: a
      // duplicate delivery, which the orchestrator's status CAS refuses.)
      Result<Value> requeued = RequeueUnknown(acks);
      if (!requeued.ok()) {
        suspect_.store(true);
        Remember(std::move(acks));
        return requeued.status();
      }
      if (requeued.value().is_error()) suspect_.store(true);
    }
    PopCall pop = MakePop(queue, acks, consume_token, then);
    return PopReply(client_->Eval(*pop.call.script, pop.call.keys, pop.call.args), std::move(acks),
                    queue, then, pop.token);
  }

 public:
  // RetrieveThenAfter (redis_broker.h).
  Result<AfterAndPopped> RetrieveAfter(const std::string& queue, const Client::EvalCall& before,
                                       const PopThen& then) {
    bool lost = false;
    {
      MutexLock lock(mu_);
      lost = lost_.count(std::this_thread::get_id()) != 0;
    }
    if (lost || suspect_.load()) {  // left to this thread's next RetrieveThen
      Result<Value> alone = client_->Eval(*before.script, before.keys, before.args);
      if (!alone.ok()) return alone.status();
      return AfterAndPopped{std::move(alone), std::optional<PoppedThen>()};
    }
    std::vector<std::string> acks = TakeAcks();
    PopCall pop = MakePop(queue, acks, true, &then);
    Result<std::vector<Result<Value>>> r = client_->EvalPipeline({before, pop.call});
    if (!r.ok()) {
      // Both may have run: the pop is resolved as a lost attempt.
      return PopReply(r.status(), std::move(acks), queue, &then, pop.token).status();
    }
    std::vector<Result<Value>>& replies = r.value();
    Result<std::optional<PoppedThen>> taken =
        PopReply(std::move(replies[1]), std::move(acks), queue, &then, pop.token);
    return AfterAndPopped{std::move(replies[0]), std::move(taken)};
  }

 private:
  // One pop attempt's script run, and the token of its record (with `then`).
  struct PopCall {
    Client::EvalCall call;
    std::string token;
  };

  PopCall MakePop(const std::string& queue, const std::vector<std::string>& acks,
                  bool consume_token, const PopThen* then) {
    PopCall pop;
    std::vector<std::string>& args = pop.call.args;
    if (then != nullptr) args = then->args();
    const std::size_t own = args.size();
    const std::string consumer = Consumer();
    // The lease is refreshed by a call at most every quarter lease, and this
    // object tries the recovery at most once an interval (the server's guard
    // admits one pass an interval across consumers): '0' skips either. A wait
    // pops at least every third of a lease (RetrieveWith), so the lease is
    // never older than 1/4 + 1/3 of itself while the object retrieves.
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    const bool refresh = now - last_lease_ms_.load() >= options_.lease_ms / 4;  // kNever: first
    if (refresh) last_lease_ms_.store(now);
    const bool recover = now - last_recovery_ms_.load() >= options_.recovery_interval_ms;
    if (recover) last_recovery_ms_.store(now);
    args.insert(args.end(), {consumer, refresh ? std::to_string(options_.lease_ms) : "0",
                             consume_token ? "1" : "0", queue,
                             recover ? std::to_string(options_.recovery_interval_ms) : "0",
                             prefix_});
    args.insert(args.end(), acks.begin(), acks.end());
    pop.call.keys = {QueueKey(queue),
                     WakeKey(queue),
                     prefix_ + keys::kConsumers,
                     prefix_ + keys::kLease + consumer,
                     prefix_ + keys::kProc + consumer,
                     prefix_ + keys::kRecovery};
    pop.call.script = then != nullptr ? then->script : &kPopScript;
    if (then != nullptr) {
      char buf[17];
      std::snprintf(buf, sizeof(buf), "%016llx",
                    static_cast<unsigned long long>(attempts_.fetch_add(1) + 1));
      pop.token = buf;
      const std::size_t pop_args = args.size() - own;
      args.push_back(pop.token);
      args.push_back(std::to_string(pop_args));
      pop.call.keys.push_back(TookKey());
    }
    return pop;
  }

  // What the pop attempt MakePop made (acknowledging `acks`) did, from its reply `r`.
  Result<std::optional<PoppedThen>> PopReply(Result<Value> r, std::vector<std::string> acks,
                                             const std::string& queue, const PopThen* then,
                                             const std::string& token) {
    if (!r.ok() || r.value().is_error()) {
      Remember(std::move(acks));  // LREM is idempotent: retry them next time
      last_lease_ms_.store(kNever);  // the refresh may not have run: the next call makes it
      if (!r.ok()) {
        suspect_.store(true);
        if (then != nullptr) {
          MutexLock lock(mu_);
          lost_[std::this_thread::get_id()] = token;
        }
        return r.status();
      }
      return ReplyError(*client_, "retrieve from '" + queue + "'", r.value());
    }
    registered_.store(true);
    const Value& v = r.value();
    if (v.is_nil()) return std::optional<PoppedThen>();
    const std::size_t want = then != nullptr ? 4 : 2;
    if (v.type != Value::Type::kArray || v.elements.size() != want) {
      return client_->Unexpected("a retrieve");
    }
    if (!v.elements[1].str.empty()) Remember({v.elements[1].str});  // '': owned, no record
    PoppedThen out{InvocationId(v.elements[0].str), std::nullopt, 0};
    if (then != nullptr) {
      out.reply = v.elements[2];
      out.more = v.elements[3].integer > 0;
    }
    return std::optional<PoppedThen>(std::move(out));
  }

  const std::shared_ptr<Client> client_;
  const RedisBrokerOptions options_;
  const std::string prefix_;
  // This process's consumer id (Consumer()): a child forked from a process that
  // made the broker (pynenc's MultiThreadRunner forks its workers) gets its own,
  // so what it pops is redelivered when it dies although its siblings live.
  mutable Mutex consumer_mu_;
  mutable std::string consumer_ PYNENC_GUARDED_BY(consumer_mu_);
  mutable pid_t consumer_pid_ PYNENC_GUARDED_BY(consumer_mu_);
  std::atomic<std::uint64_t> interrupt_epoch_{0};
  std::atomic<int> blocked_{0};  // Retrieve calls in (or entering) their BLPOP
  // An Interrupt's push under way (shared with the thread that makes it).
  std::shared_ptr<std::atomic<bool>> pushing_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> registered_{false};
  std::atomic<bool> suspect_{false};        // a pop's reply was lost: see RequeueUnknown
  std::atomic<std::uint64_t> attempts_{0};  // tokens of combined attempts
  // When a call last refreshed this consumer's lease / tried the recovery
  // (steady clock, ms); a forked child's consumer starts with no lease.
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min() / 2;
  mutable std::atomic<std::int64_t> last_lease_ms_{kNever};
  std::atomic<std::int64_t> last_recovery_ms_{kNever};
  Mutex mu_;
  // Per calling thread: the token of a combined attempt whose reply was lost.
  std::unordered_map<std::thread::id, std::string> lost_ PYNENC_GUARDED_BY(mu_);
  // Per calling thread: processing entries delivered and not yet acknowledged.
  std::unordered_map<std::thread::id, std::vector<std::string>> unacked_ PYNENC_GUARDED_BY(mu_);
};

}  // namespace


Result<std::optional<PoppedThen>> RetrieveThen(Broker& broker, const std::string& queue,
                                               std::int64_t timeout_ms, const PopThen& then) {
  auto* redis = dynamic_cast<RedisBroker*>(&broker);
  if (redis == nullptr) {
    return Status::InvalidArgument("RetrieveThen needs a redis broker (NewRedisBroker)");
  }
  return redis->RetrieveWith(queue, timeout_ms, &then);
}

Result<AfterAndPopped> RetrieveThenAfter(Broker& broker, const std::string& queue,
                                         const Client::EvalCall& before, const PopThen& then) {
  auto* redis = dynamic_cast<RedisBroker*>(&broker);
  if (redis == nullptr) {
    return Status::InvalidArgument("RetrieveThenAfter needs a redis broker (NewRedisBroker)");
  }
  return redis->RetrieveAfter(queue, before, then);
}

std::string BrokerScore(double priority) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", -priority);
  return buf;
}

Result<std::unique_ptr<Broker>> NewRedisBroker(std::shared_ptr<Client> client,
                                               const BackendConfig& config) {
  return NewRedisBroker(std::move(client), config, RedisBrokerOptions{});
}

Result<std::unique_ptr<Broker>> NewRedisBroker(std::shared_ptr<Client> client,
                                               const BackendConfig& config,
                                               const RedisBrokerOptions& options) {
  if (options.lease_ms <= 0 || options.recovery_interval_ms <= 0 || options.wake_slice_ms <= 0 ||
      options.wake_token_bound <= 0) {
    return Status::BadConfig("redis broker options must be positive");
  }
  return std::unique_ptr<Broker>(new RedisBroker(std::move(client), config, options));
}

}  // namespace pynenc_cpp::redis
