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
#include <functional>
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

bool ParseInt(const std::string& text, long lo, long hi, long* out) {
  if (text.empty()) return false;
  char* tail = nullptr;
  const long v = std::strtol(text.c_str(), &tail, 10);
  if (*tail != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
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

namespace {

// %XX decoding (as redis-py's urllib unquote for user info and a socket path;
// with `plus_is_space`, as its parse_qs for query values); a '%' not followed by
// two hex digits is kept as it is.
std::string PercentDecode(const std::string& s, bool plus_is_space = false) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

using Shown = std::function<std::string(const std::string&)>;

// "host[:port]" or "[v6]" / "[v6]:port" into host and port (port kept when absent).
Status ParseHostPort(const std::string& text, const Shown& shown, std::string* host, int* port) {
  std::string hostport = text;
  std::string bracketed;
  if (!hostport.empty() && hostport[0] == '[') {
    const auto close = hostport.find(']');
    if (close == std::string::npos || close == 1) {
      return Status::BadConfig("redis URI host " + shown(hostport) +
                               " is not an IPv6 literal like [::1]");
    }
    bracketed = hostport.substr(1, close - 1);
    hostport = hostport.substr(close + 1);  // "" or ":port"
    if (!hostport.empty() && hostport[0] != ':') {
      return Status::BadConfig("redis URI: expected ':port' after the IPv6 literal");
    }
  }
  const auto colon = hostport.rfind(':');
  if (colon == std::string::npos) {
    *host = bracketed.empty() ? hostport : bracketed;
    return Status::Ok();
  }
  *host = bracketed.empty() ? hostport.substr(0, colon) : bracketed;
  long v = 0;
  if (!ParseInt(hostport.substr(colon + 1), 1, 65535, &v)) {
    return Status::BadConfig("redis URI port " + shown(hostport.substr(colon + 1)) +
                             " is not a port number (1-65535)");
  }
  *port = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

Result<RedisOptions> ParseRedisLocation(const std::string& location) {
  RedisOptions o;
  // Parts of a location with user info are never echoed in errors: a password
  // with an unencoded '/' or '?' would land in them.
  const bool secretive = location.find('@') != std::string::npos;
  const Shown shown = [secretive](const std::string& part) {
    return secretive ? std::string("(not shown: the URI has user info)") : "'" + part + "'";
  };
  std::string rest = location;
  const bool unix_socket = rest.rfind("unix://", 0) == 0;
  const bool sentinel = rest.rfind("sentinel://", 0) == 0;
  if (unix_socket) rest = rest.substr(7);
  if (sentinel) rest = rest.substr(11);
  // [[user]:password@] before the host: up to the last '@' before the first
  // '/', '?' or '#' (a password with those must be percent-encoded, as for
  // redis-py); user and password are percent-decoded.
  if (const auto stop = rest.find_first_of("/?#"), at = rest.rfind('@', stop);
      at != std::string::npos && (stop == std::string::npos || at < stop)) {
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = userinfo.find(':');
    o.username = PercentDecode(userinfo.substr(0, colon));
    if (colon != std::string::npos) o.password = PercentDecode(userinfo.substr(colon + 1));
  }
  std::string query;
  if (auto q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string hostport = rest;
  std::string db_text;
  if (unix_socket) {
    // The whole path is the socket; the database comes from ?db=N.
    if (rest.empty() || rest[0] != '/') {
      return Status::BadConfig(
          "redis unix socket URI needs an absolute path: unix:///path/to.sock");
    }
    o.unix_path = PercentDecode(rest);
    if (o.unix_path.find('\0') != std::string::npos) {
      return Status::BadConfig("redis unix socket path has a NUL byte (%00)");
    }
    o.host.clear();
    o.port = 0;
    hostport.clear();
  } else if (sentinel) {
    // sentinel://h1[:p1][,h2[:p2]...]/master_name[/db]
    const auto slash = rest.find('/');
    hostport = rest.substr(0, slash);
    std::string path = slash == std::string::npos ? "" : rest.substr(slash + 1);
    const auto next = path.find('/');
    o.master_name = PercentDecode(path.substr(0, next));
    if (next != std::string::npos) db_text = path.substr(next + 1);
    if (o.master_name.empty()) {
      return Status::BadConfig(
          "redis Sentinel URI needs the master's name after the sentinels: "
          "redis+sentinel://host:26379[,host:26379...]/MASTER_NAME[/db]");
    }
    std::size_t from = 0;
    while (from <= hostport.size()) {
      std::size_t comma = hostport.find(',', from);
      if (comma == std::string::npos) comma = hostport.size();
      RedisOptions::HostPort hp;
      Status parsed = ParseHostPort(hostport.substr(from, comma - from), shown, &hp.host, &hp.port);
      if (!parsed.ok()) return parsed;
      if (hp.host.empty()) {
        return Status::BadConfig("redis Sentinel URI '" + RedactUri(location) +
                                 "' has an empty sentinel host");
      }
      o.sentinels.push_back(std::move(hp));
      from = comma + 1;
    }
    o.host.clear();
    o.port = 0;
    hostport.clear();
  } else if (auto slash = rest.find('/'); slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    db_text = rest.substr(slash + 1);
  }
  if (!db_text.empty()) {
    long v = 0;
    if (!ParseInt(db_text, 0, 1'000'000, &v)) {
      return Status::BadConfig("redis URI database " + shown(db_text) + " is not a number");
    }
    o.db = static_cast<int>(v);
  }
  if (!unix_socket && !sentinel) {
    Status parsed = ParseHostPort(hostport, shown, &o.host, &o.port);
    if (!parsed.ok()) return parsed;
    if (o.host.empty()) {
      return Status::BadConfig("redis URI '" + RedactUri(location) + "' has no host");
    }
  }
  static const char* kKnown =
      "; known: db, connect_timeout_ms, io_timeout_ms, password, min_replicas, "
      "min_replicas_timeout_ms, and with Sentinel sentinel_username, sentinel_password";
  std::size_t start = 0;
  while (start < query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const std::string key = pair.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    long v = 0;
    if (key == "connect_timeout_ms" || key == "io_timeout_ms" ||
        key == "min_replicas_timeout_ms") {
      if (!ParseInt(value, 1, 3'600'000, &v)) {
        return Status::BadConfig("redis option " + key + "=" + shown(value) +
                                 ": expected milliseconds between 1 and 3600000");
      }
      (key == "connect_timeout_ms" ? o.connect_timeout_ms
       : key == "io_timeout_ms"    ? o.io_timeout_ms
                                   : o.min_replicas_timeout_ms) = static_cast<int>(v);
    } else if (key == "min_replicas") {
      if (!ParseInt(value, 0, 1'000, &v)) {
        return Status::BadConfig("redis option min_replicas=" + shown(value) +
                                 ": expected a number of replicas from 0 to 1000");
      }
      o.min_replicas = static_cast<int>(v);
    } else if (key == "password") {
      o.password = PercentDecode(value, true);
    } else if (sentinel && key == "sentinel_password") {
      o.sentinel_password = PercentDecode(value, true);
    } else if (sentinel && key == "sentinel_username") {
      o.sentinel_username = PercentDecode(value, true);
    } else if (key == "db") {
      if (!ParseInt(value, 0, 1'000'000, &v)) {
        return Status::BadConfig("redis option db=" + shown(value) + " is not a number");
      }
      o.db = static_cast<int>(v);
    } else {
      return Status::BadConfig("unknown redis option " + shown(key) + kKnown);
    }
  }
  return o;
}

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
