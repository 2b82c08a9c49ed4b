#include "redis/redis_client.h"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <sys/socket.h>
#include <unistd.h>

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>
#include <unordered_map>

#include "pynenc_cpp/core/metrics.h"
#include "pynenc_cpp/core/thread_annotations.h"

namespace pynenc_cpp::redis {
namespace {

timeval ToTimeval(std::int64_t ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

Value Convert(const redisReply* r) {
  Value v;
  if (r == nullptr) return v;
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      v.type = Value::Type::kInt;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      v.type = Value::Type::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = Value::Type::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = Value::Type::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      v.type = Value::Type::kArray;
      v.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(Convert(r->element[i]));
      break;
    default:
      break;  // nil
  }
  return v;
}

}  // namespace

// A live hiredis connection. Used by one thread at a time.
class Connection {
 public:
  explicit Connection(redisContext* ctx) : ctx_(ctx) {}
  ~Connection() {
    if (ctx_ != nullptr) redisFree(ctx_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  redisContext* ctx() { return ctx_; }
  bool broken() const { return discarded_ || ctx_ == nullptr || ctx_->err != 0; }
  // Not to be pooled again (it answered READONLY: no longer the master's).
  void Discard() { discarded_ = true; }
  // Whether the server closed this idle connection (or wrote to it unasked):
  // peeks at the socket without blocking. Nothing pending (EAGAIN) means it is
  // still open, as far as the kernel knows.
  bool PeerClosedWhileIdle() const {
    if (broken()) return true;
    char byte;
    const ssize_t n = recv(ctx_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;  // EOF: closed by the server
    if (n > 0) return true;   // an unasked reply: out of step
    return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);  // reset, ...
  }
  std::string error() const { return ctx_ == nullptr ? "no connection" : ctx_->errstr; }
  void Abandon() { ctx_ = nullptr; }

  // Appends one command to the output buffer.
  void Append(const std::vector<std::string>& argv) {
    std::vector<const char*> args;
    std::vector<size_t> lens;
    args.reserve(argv.size());
    lens.reserve(argv.size());
    for (const std::string& a : argv) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), args.data(), lens.data());
  }

  // Reads the next reply; false on an I/O error (see error()).
  bool Read(Value* out) {
    void* raw = nullptr;
    errno = 0;
    if (redisGetReply(ctx_, &raw) != REDIS_OK) return false;
    *out = Convert(static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    return true;
  }

 private:
  redisContext* ctx_;
  bool discarded_ = false;
};

Script::Script(std::string_view source) : source_(ExpandKeyNames(source)) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(source_.data()), source_.size(), digest);
  char hex[2 * SHA_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA_DIGEST_LENGTH; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  sha1_.assign(hex, 2 * SHA_DIGEST_LENGTH);
}

Client::Client(RedisOptions options)
    : options_(std::move(options)),
      io_ms_(options_.io_timeout_ms +
             (options_.min_replicas > 0 ? options_.min_replicas_timeout_ms : 0)),
      pid_(getpid()) {}

Client::~Client() {
  MutexLock lock(mu_);
  if (pid_ != getpid()) {
    for (auto& c : idle_) c->Abandon();
  }
  idle_.clear();
}

std::string Client::Endpoint() const {
  if (!options_.unix_path.empty()) return "unix:" + options_.unix_path;
  if (!options_.sentinels.empty()) {
    MutexLock lock(master_mu_);
    return "sentinel master '" + options_.master_name + "'" +
           (master_.empty() ? "" : " (" + master_ + ")");
  }
  const bool v6 = options_.host.find(':') != std::string::npos;
  return (v6 ? "[" + options_.host + "]" : options_.host) + ":" + std::to_string(options_.port);
}

std::string Client::Describe() const { return Endpoint() + "/" + std::to_string(options_.db); }

Status Client::Failure(const std::string& what, const std::string& error) const {
  return Status::BackendFailure("redis at " + Describe() + ": " + what + " failed: " + error);
}

Status Client::Unexpected(const std::string& what) const {
  return Status::BackendFailure("redis at " + Describe() + ": unexpected reply to " + what);
}

Status Client::Corrupt(const std::string& detail) const {
  return Status::BackendFailure("redis at " + Describe() + ": " + detail);
}

Status Client::Refused(const std::string& command, const std::string& reply) const {
  // The server's reply never holds the password; the URL's is never shown.
  const std::string head = "redis at " + Describe() + " refused " + command + ": " + reply;
  if (reply.rfind("NOAUTH", 0) == 0) {
    return Status::BadConfig(
        head + " (the server needs a password and the URL gives none: put it in "
               "cpp_redis_url, redis://:PASSWORD@host:port/db or redis://USER:PASSWORD@..., "
               "percent-encoded, or ?password=...)");
  }
  if (reply.rfind("WRONGPASS", 0) == 0 || reply.find("invalid password") != std::string::npos ||
      reply.find("without any password configured") != std::string::npos) {
    return Status::BadConfig(
        head + " (the server refused the URL's " + (options_.username.empty() ? "" : "user and ") +
        "password: check the password" + (options_.username.empty() ? "" : " and user") +
        " in cpp_redis_url)");
  }
  return Status::BadConfig(head);
}

Result<std::shared_ptr<Client>> Client::Open(const RedisOptions& options) {
  std::shared_ptr<Client> client(new Client(options));
  Result<Value> pong = client->Command({"PING"});
  if (!pong.ok()) return pong.status();
  if (pong.value().is_error()) {
    const std::string& reply = pong.value().str;
    if (reply.rfind("NOAUTH", 0) == 0) return client->Refused("PING", reply);
    return Status::BackendFailure("redis at " + client->Describe() + " refused PING: " + reply);
  }
  return client;
}

namespace {

std::string HostPortText(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// One command on a fresh connection and its reply; false on an I/O error.
bool Ask(Connection& conn, const std::vector<std::string>& argv, Value* reply) {
  conn.Append(argv);
  return conn.Read(reply);
}

}  // namespace

Result<RedisOptions::HostPort> Client::AskSentinels(std::int64_t budget_ms) {
  std::string causes;
  const std::size_t n = options_.sentinels.size();
  std::size_t first = 0;
  {
    MutexLock lock(master_mu_);
    first = sentinel_first_;
  }
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    const RedisOptions::HostPort& s = options_.sentinels[i];
    const std::string where = "sentinel " + HostPortText(s.host, s.port);
    const timeval tv = ToTimeval(std::max<std::int64_t>(
        1, std::min<std::int64_t>(budget_ms, options_.io_timeout_ms)));
    Connection conn(redisConnectWithTimeout(s.host.c_str(), s.port, tv));
    if (conn.broken()) {
      causes += (causes.empty() ? "" : "; ") + where + ": " + conn.error();
      continue;
    }
    redisSetTimeout(conn.ctx(), tv);
    Value v;
    if (!options_.sentinel_password.empty()) {
      std::vector<std::string> auth{"AUTH"};
      if (!options_.sentinel_username.empty()) auth.push_back(options_.sentinel_username);
      auth.push_back(options_.sentinel_password);
      if (!Ask(conn, auth, &v) || v.is_error()) {
        // The reply names no password; ours is never shown.
        causes += (causes.empty() ? "" : "; ") + where + " refused AUTH: " +
                  (v.is_error() ? v.str : conn.error()) +
                  " (check sentinel_password/sentinel_username)";
        continue;
      }
    }
    if (!Ask(conn, {"SENTINEL", "get-master-addr-by-name", options_.master_name}, &v)) {
      causes += (causes.empty() ? "" : "; ") + where + ": " + conn.error();
      continue;
    }
    long port = 0;
    if (v.type == Value::Type::kArray && v.elements.size() == 2 &&
        ParseInt(v.elements[1].str, 1, 65535, &port) && !v.elements[0].str.empty()) {
      MutexLock lock(master_mu_);
      sentinel_first_ = i;  // asked first next time
      return RedisOptions::HostPort{v.elements[0].str, static_cast<int>(port)};
    }
    causes += (causes.empty() ? "" : "; ") + where +
              (v.is_nil()       ? " knows no master named '" + options_.master_name + "'"
               : v.is_error()   ? ": " + v.str
                                : ": unexpected reply to SENTINEL get-master-addr-by-name");
  }
  return Status::ConnectionLost("no sentinel named the master: " + causes, /*maybe_applied=*/false);
}

Result<std::unique_ptr<Connection>> Client::Connect() {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.connect_timeout_ms);
  auto backoff = std::chrono::milliseconds(50);
  const bool sentinel = !options_.sentinels.empty();
  std::string cause;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    const timeval budget = ToTimeval(std::max<long>(left, 1));
    std::string host = options_.host;
    int port = options_.port;
    bool located = true;
    if (sentinel) {
      Result<RedisOptions::HostPort> master = AskSentinels(std::max<long>(left, 1));
      if (master.ok()) {
        host = master.value().host;
        port = master.value().port;
      } else {
        cause = master.status().message();
        located = false;
      }
    }
    redisContext* ctx = nullptr;
    if (located) {
      ctx = options_.unix_path.empty()
                ? redisConnectWithTimeout(host.c_str(), port, budget)
                : redisConnectUnixWithTimeout(options_.unix_path.c_str(), budget);
    }
    auto conn = std::make_unique<Connection>(ctx);
    if (ctx != nullptr && ctx->err == 0) {
      redisSetTimeout(ctx, ToTimeval(io_ms_));
      if (options_.unix_path.empty()) redisEnableKeepAlive(ctx);  // TCP only
      std::vector<std::vector<std::string>> setup;
      if (!options_.username.empty()) {
        setup.push_back({"AUTH", options_.username, options_.password});
      } else if (!options_.password.empty()) {
        setup.push_back({"AUTH", options_.password});
      }
      if (options_.db != 0) setup.push_back({"SELECT", std::to_string(options_.db)});
      // With Sentinel: the server must say it is the master (a sentinel may still
      // name a demoted one, or one not yet promoted, during a failover).
      if (sentinel) setup.push_back({"ROLE"});
      bool ok = true;
      for (const auto& cmd : setup) {
        conn->Append(cmd);
        Value v;
        if (!conn->Read(&v) || v.is_error()) {
          cause = v.is_error() ? v.str : conn->error();
          ok = false;
          if (v.is_error()) return Refused(cmd[0], cause);
          break;
        }
        const bool master =
            v.type == Value::Type::kArray && !v.elements.empty() && v.elements[0].str == "master";
        if (cmd[0] == "ROLE" && !master) {
          cause = HostPortText(host, port) + ", which the sentinels name, reports the role '" +
                  (v.elements.empty() ? std::string("?") : v.elements[0].str) +
                  "', not master (a failover under way?)";
          ok = false;
          break;
        }
      }
      if (ok) {
        if (sentinel) {
          MutexLock lock(master_mu_);
          master_ = HostPortText(host, port);
        }
        metrics::OnRedisConnectionOpened();
        return conn;
      }
    } else if (located) {
      cause = ctx == nullptr ? "cannot allocate a connection" : ctx->errstr;
      if (sentinel) cause = HostPortText(host, port) + ", which the sentinels name: " + cause;
    }
    if (std::chrono::steady_clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(sentinel ? 250 : 1000));
  }
  return Status::ConnectionLost("cannot reach redis at " + Endpoint() + ": " + cause +
                                    " (gave up after " +
                                    std::to_string(options_.connect_timeout_ms) + " ms)",
                                /*maybe_applied=*/false);
}

Result<std::unique_ptr<Connection>> Client::Acquire() {
  while (true) {
    std::unique_ptr<Connection> conn;
    {
      MutexLock lock(mu_);
      if (pid_ != getpid()) {  // forked: pooled sockets belong to the parent
        for (auto& c : idle_) c->Abandon();
        idle_.clear();
        pid_ = getpid();
      }
      if (idle_.empty()) break;
      conn = std::move(idle_.back());
      idle_.pop_back();
    }
    if (!conn->PeerClosedWhileIdle()) return conn;
    metrics::OnRedisConnectionLost();  // dropped; the next one is checked the same way
  }
  return Connect();
}

void Client::Release(std::unique_ptr<Connection> conn) {
  if (conn->broken()) {  // dropped: the next call connects afresh
    metrics::OnRedisConnectionLost();
    return;
  }
  MutexLock lock(mu_);
  if (pid_ != getpid()) {
    conn->Abandon();
    return;
  }
  idle_.push_back(std::move(conn));
}

template <typename T, typename Fn>
Result<T> Client::WithConnection(Fn&& send) {
  Result<std::unique_ptr<Connection>> acquired = Acquire();
  if (!acquired.ok()) return acquired.status();
  std::unique_ptr<Connection> conn = std::move(acquired).value();
  std::optional<T> out = send(*conn);
  if (out) {
    Release(std::move(conn));
    return std::move(*out);
  }
  const std::string cause = conn->error();
  // Sent on a connection that was open: whether it ran cannot be known here (a
  // server killed between applying it and replying looks like one that closed
  // the connection first). Never sent again; the caller decides.
  return Status::ConnectionLost("connection to redis at " + Describe() + " failed: " + cause +
                                    " (the command may or may not have been applied)",
                                /*maybe_applied=*/true);
}

namespace {

// A server that is loading its dataset (just restarted) refuses every command
// with LOADING; nothing was applied, so waiting and sending again is safe.
bool IsLoading(const Value& v) { return v.is_error() && v.str.rfind("LOADING", 0) == 0; }
// A replica refuses a write (a command, or a script at its first write) with
// READONLY; nothing was applied (a replica applies no client write).
bool IsReadOnly(const Value& v) { return v.is_error() && v.str.rfind("READONLY", 0) == 0; }

// Commands that never write: no WAIT for replicas after a call of only these.
bool NeverWrites(const std::string& name) {
  static const char* const kReads[] = {
      "PING", "GET", "MGET", "HGET", "HMGET", "HGETALL", "HKEYS", "HLEN", "HEXISTS", "HSCAN",
      "EXISTS", "TYPE", "TTL", "PTTL", "STRLEN", "SCAN", "KEYS", "ZRANGE", "ZRANGEBYSCORE",
      "ZREVRANGE", "ZREVRANGEBYSCORE", "ZSCORE", "ZCARD", "ZCOUNT", "ZRANK", "ZSCAN", "LRANGE",
      "LLEN", "LINDEX", "SMEMBERS", "SISMEMBER", "SCARD", "SSCAN", "XRANGE", "XREVRANGE", "XLEN",
      "INFO", "TIME", "ROLE", "DBSIZE", "OBJECT", "MEMORY", "CLIENT", "SCRIPT", "WAIT",
      "CONFIG"};
  for (const char* r : kReads) {
    if (strcasecmp(name.c_str(), r) == 0) return true;
  }
  return false;
}

}  // namespace

Result<std::vector<Value>> Client::Send(const std::vector<std::string>* one,
                                        const std::vector<std::vector<std::string>>* many,
                                        std::int64_t block_ms) {
  const std::size_t count = one != nullptr ? 1 : many->size();
  auto command = [&](std::size_t i) -> const std::vector<std::string>& {
    return one != nullptr ? *one : (*many)[i];
  };
  const bool sentinel = !options_.sentinels.empty();
  bool wait = false;
  for (std::size_t i = 0; options_.min_replicas > 0 && i < count && !wait; ++i) {
    wait = !command(i).empty() && !NeverWrites(command(i)[0]);
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.connect_timeout_ms);
  while (true) {
    Value acked;
    Result<std::vector<Value>> r = WithConnection<std::vector<Value>>(
        [&](Connection& c) -> std::optional<std::vector<Value>> {
          if (block_ms > 0) redisSetTimeout(c.ctx(), ToTimeval(io_ms_ + block_ms));
          for (std::size_t i = 0; i < count; ++i) c.Append(command(i));
          // WAIT in the same round trip: it answers once the replicas have what
          // this connection wrote (or its timeout passed), never before the writes.
          if (wait) {
            c.Append({"WAIT", std::to_string(options_.min_replicas),
                      std::to_string(options_.min_replicas_timeout_ms)});
          }
          std::vector<Value> out(count);
          for (Value& v : out) {
            if (!c.Read(&v)) return std::nullopt;
          }
          if (wait && !c.Read(&acked)) return std::nullopt;
          // Too few replicas so far (one resyncing after a failover, say): the
          // write is on the master, so WAIT again on this connection, for the
          // same writes, until the connect timeout is spent.
          while (wait && acked.type == Value::Type::kInt && acked.integer < options_.min_replicas &&
                 std::chrono::steady_clock::now() < deadline) {
            c.Append({"WAIT", std::to_string(options_.min_replicas),
                      std::to_string(options_.min_replicas_timeout_ms)});
            if (!c.Read(&acked)) return std::nullopt;
          }
          if (block_ms > 0) redisSetTimeout(c.ctx(), ToTimeval(io_ms_));
          if (std::any_of(out.begin(), out.end(), IsReadOnly)) c.Discard();
          return out;
        });
    if (!r.ok()) return r;
    const std::vector<Value>& vs = r.value();
    const bool loading = !vs.empty() && IsLoading(vs.front());
    // With Sentinel a replica's READONLY is a failover under way: a new
    // connection asks the sentinels again. Without, it is the reply.
    const bool readonly = sentinel && std::any_of(vs.begin(), vs.end(), IsReadOnly);
    if (!loading && !readonly) {
      if (!wait) return r;
      if (acked.type != Value::Type::kInt) {
        return Failure("WAIT", acked.is_error() ? acked.str : "unexpected reply");
      }
      if (acked.integer < options_.min_replicas) {
        return Status::BackendFailure(
            "redis at " + Describe() + ": the write was applied on the master, but " +
            std::to_string(acked.integer) + " of the " + std::to_string(options_.min_replicas) +
            " replicas it must reach (min_replicas) acknowledged it within " +
            std::to_string(
                std::max(options_.min_replicas_timeout_ms, options_.connect_timeout_ms)) +
            " ms: it is not safe from the master's loss");
      }
      return r;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      // Nothing was applied: a lost connection the caller may ride out.
      return Status::ConnectionLost(
          "redis at " + Describe() +
              (loading ? " is still loading its data after "
                       : " answers as a replica (READONLY) and the sentinels name no other "
                         "master after ") +
              std::to_string(options_.connect_timeout_ms) + " ms",
          /*maybe_applied=*/false);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<Value> Client::Command(const std::vector<std::string>& argv) {
  Result<std::vector<Value>> r = Send(&argv, nullptr, 0);
  if (!r.ok()) return r.status();
  return std::move(r.value().front());
}

Result<std::vector<Value>> Client::Pipeline(const std::vector<std::vector<std::string>>& commands) {
  return Send(nullptr, &commands, 0);
}

Result<Value> Client::BlockingCommand(const std::vector<std::string>& argv, std::int64_t block_ms) {
  Result<std::vector<Value>> r = Send(&argv, nullptr, std::max<std::int64_t>(block_ms, 1));
  if (!r.ok()) return r.status();
  return std::move(r.value().front());
}

namespace {

std::vector<std::string> EvalShaArgv(const Script& script, const std::vector<std::string>& keys,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> a{"EVALSHA", script.sha1(), std::to_string(keys.size())};
  a.reserve(a.size() + keys.size() + args.size());
  a.insert(a.end(), keys.begin(), keys.end());
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

bool IsNoScript(const Value& v) { return v.is_error() && v.str.rfind("NOSCRIPT", 0) == 0; }

}  // namespace

Result<Value> Client::Eval(const Script& script, const std::vector<std::string>& keys,
                           const std::vector<std::string>& args) {
  Result<Value> r = Command(EvalShaArgv(script, keys, args));
  if (!r.ok() || !IsNoScript(r.value())) return r;
  Result<Value> loaded = Command({"SCRIPT", "LOAD", script.source()});
  if (!loaded.ok()) return loaded;
  if (loaded.value().is_error()) {
    return Status::BackendFailure("redis at " + Describe() +
                                  " could not load a script: " + loaded.value().str);
  }
  return Command(EvalShaArgv(script, keys, args));
}

Result<std::vector<Result<Value>>> Client::EvalPipeline(const std::vector<EvalCall>& calls) {
  std::vector<std::vector<std::string>> commands;
  commands.reserve(calls.size());
  for (const EvalCall& c : calls) commands.push_back(EvalShaArgv(*c.script, c.keys, c.args));
  Result<std::vector<Value>> replies = Pipeline(commands);
  if (!replies.ok()) return replies.status();
  std::vector<Result<Value>> out;
  out.reserve(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    Value& v = replies.value()[i];
    if (IsNoScript(v)) {
      out.push_back(Eval(*calls[i].script, calls[i].keys, calls[i].args));
    } else {
      out.push_back(std::move(v));
    }
  }
  return out;
}

Result<std::shared_ptr<Client>> OpenClient(const BackendConfig& config) {
  Result<ParsedBackendUri> parsed = ParseBackendUri(config.uri);
  if (!parsed.ok()) return parsed.status();
  if (parsed.value().kind != BackendKind::kRedis) {
    return Status::BadConfig("backend URI '" + RedactUri(config.uri) + "' is not a redis:// URI");
  }
  Result<RedisOptions> options = ParseRedisLocation(parsed.value().location);
  if (!options.ok()) return options.status();
  return Client::Open(options.value());
}

}  // namespace pynenc_cpp::redis
