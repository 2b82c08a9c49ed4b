// Shared Redis plumbing for every Redis backend (not a public header).
//
// A Client is one Redis server + database as seen by this process: a pool of
// hiredis connections, reconnect with backoff, Lua scripts run by EVALSHA (loaded
// on NOSCRIPT), pipelines. The five components of an app opened on the same
// server share one Client. Keys are namespaced by the components (see
// KeyPrefix), so several apps share one database.
//
// Thread safety: Client is thread-safe; each call borrows a connection for its
// duration. Fork safety: a child process never uses its parent's connections.
// Errors: replies that are Redis errors come back as Value{kError} (the caller
// decides), except LOADING (a server reading its data after a restart), which
// is waited out up to the connect timeout; failures to reach or talk to the
// server come back as kBackendFailure naming host, port and cause.
// Sentinel: with RedisOptions::sentinels, every new connection asks the
// sentinels for the master and checks its ROLE; READONLY (a demoted master) is
// waited out like LOADING. min_replicas: WAIT after every call that may write.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pynenc_cpp/core/error.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "pynenc_cpp/ports/backend_config.h"
#include "redis/redis_keys.h"  // KeyPrefix, which every component's keys start with

struct redisContext;

namespace pynenc_cpp::redis {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string unix_path;  // non-empty: connect to this unix socket instead of host:port
  int db = 0;
  int connect_timeout_ms = 2000;  // total time spent (re)connecting before giving up
  int io_timeout_ms = 5000;       // per command (blocking commands add their block time)
  std::string username;           // Redis 6 ACL user ("": the default user)
  std::string password;
  // Sentinel (non-empty `sentinels`): the master is whichever server the
  // sentinels name for `master_name`, asked again on every new connection, and a
  // server that does not report itself a master (ROLE) is not used. host/port
  // then hold nothing.
  struct HostPort {
    std::string host;
    int port = 26379;
  };
  std::vector<HostPort> sentinels;
  std::string master_name;
  std::string sentinel_username;  // AUTH to the sentinels ("" and no password: none)
  std::string sentinel_password;
  // WAIT after every command or script: the call succeeds only once this many
  // replicas acknowledged the connection's writes, within min_replicas_timeout_ms.
  int min_replicas = 0;
  int min_replicas_timeout_ms = 1000;
};

// Parses (redis_options.cc) the location part of "redis://<location>" (or of a Sentinel URI,
// "sentinel://<location>" as ParseBackendUri hands it over:
// "[[user]:password@]host[:port][,host[:port]...]/master_name[/db][?options]",
// the hosts being the sentinels (port 26379 by default), user and password the
// master's; options also sentinel_username, sentinel_password):
// "[[user]:password@]host[:port][/db][?db=N&connect_timeout_ms=N&io_timeout_ms=N&password=P
//  &min_replicas=N&min_replicas_timeout_ms=N]"
// where host may be an IPv6 literal in brackets ("[::1]:6379"); or a unix
// socket location "unix://[[user]:password@]/path/to.sock[?db=N&...]" (as
// ParseBackendUri hands over a unix:// URI).
// (as redis-py: "redis://:pw@h" is a password, "redis://user:pw@h" an ACL user
// and its password, "redis://user@h" a user with no password; both
// percent-decoded, so a password with '/', '?', '#' or '@' is percent-encoded).
// kBadConfig on error; no message ever contains the password.
Result<RedisOptions> ParseRedisLocation(const std::string& location);

// `text` as a whole decimal number within [lo, hi] into *out; false otherwise.
bool ParseInt(const std::string& text, long lo, long hi, long* out);

// One reply, converted from hiredis' redisReply.
struct Value {
  enum class Type { kNil, kInt, kString, kStatus, kError, kArray };
  Type type = Type::kNil;
  std::int64_t integer = 0;
  std::string str;  // kString, kStatus, kError
  std::vector<Value> elements;

  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
};

// A Lua script and its SHA1, computed once. The source may name keys of the
// layout as ${name} (redis_keys.h); they are expanded here, before the SHA1.
class Script {
 public:
  explicit Script(std::string_view source);
  const std::string& source() const { return source_; }
  const std::string& sha1() const { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;
};

class Connection;

class Client {
 public:
  // Opens a new pool for the server (its own connections: nothing is shared
  // with another Client; a Storage owns one per app) and verifies it answers
  // PING within the connect timeout: otherwise kConnectionLost "cannot reach
  // redis at host:port: <cause>". A server that needs a password the URL does
  // not give (NOAUTH), or refuses the URL's (WRONGPASS), is kBadConfig with a
  // hint about the URL's password, which is never shown.
  static Result<std::shared_ptr<Client>> Open(const RedisOptions& options);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Runs one command. Values are binary-safe.
  Result<Value> Command(const std::vector<std::string>& argv);
  // Sends every command in one round trip; replies in order.
  Result<std::vector<Value>> Pipeline(const std::vector<std::vector<std::string>>& commands);
  // EVALSHA `script` (SCRIPT LOAD and again on NOSCRIPT).
  Result<Value> Eval(const Script& script, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args);
  // One script run of EvalPipeline.
  struct EvalCall {
    const Script* script = nullptr;
    std::vector<std::string> keys;
    std::vector<std::string> args;
  };
  // Eval of every call in ONE round trip, in order. The outer error: the round
  // trip failed (each call may or may not have run). Else each call's outcome: a
  // call the server did not know (NOSCRIPT: it did not run) is loaded and run
  // again on its own, after the calls that followed it; that run's failure is
  // that call's alone.
  Result<std::vector<Result<Value>>> EvalPipeline(const std::vector<EvalCall>& calls);
  // A blocking command (BLMOVE, BLPOP, ...) that the server may hold for up to
  // `block_ms`: the socket timeout is extended by that much for this call.
  Result<Value> BlockingCommand(const std::vector<std::string>& argv, std::int64_t block_ms);

  const RedisOptions& options() const { return options_; }
  // "host:port", "[v6]:port" or "unix:/path", for messages.
  std::string Endpoint() const;
  // Endpoint() + "/db", for messages.
  std::string Describe() const;
  // The errors of a port's operation, made here alike for every port:
  // kBackendFailure "redis at <Describe()>: <what> failed: <error>".
  Status Failure(const std::string& what, const std::string& error) const;
  // kBackendFailure "redis at <Describe()>: unexpected reply to <what>".
  Status Unexpected(const std::string& what) const;
  // kBackendFailure "redis at <Describe()>: <detail>", for data a port cannot read
  // back ("corrupt generation for fenced key 'k'").
  Status Corrupt(const std::string& detail) const;

 private:
  explicit Client(RedisOptions options);
  // A pooled connection the server has not closed, or a fresh one. Pooled
  // connections the server closed while idle (a restart, a timeout, CLIENT KILL)
  // are found before anything is sent on them and dropped.
  Result<std::unique_ptr<Connection>> Acquire();
  Result<std::unique_ptr<Connection>> Connect();
  // kBadConfig for the server's error `reply` to `command` (AUTH, SELECT, PING
  // on a fresh connection); NOAUTH and WRONGPASS say what to fix in the URL.
  Status Refused(const std::string& command, const std::string& reply) const;
  void Release(std::unique_ptr<Connection> conn);
  // Runs `send` on a connection from Acquire. An I/O failure once the command was
  // sent is reported, never retried: the server may have applied it and lost only
  // the reply (killed after an fsync, say), and a script (a pop, a status change)
  // run twice is not the same as once.
  template <typename T, typename Fn>
  Result<T> WithConnection(Fn&& send);
  // Sends `one` command, or else every one of `many`, in one round trip (a
  // blocking one when block_ms > 0: the socket waits that much longer), then
  // WAIT for the replicas when the options ask for them and a command may write.
  // Sent again while the server answers LOADING (reading its data after a
  // restart) or, with Sentinel, READONLY (a demoted master), up to the connect
  // timeout: neither applied anything.
  Result<std::vector<Value>> Send(const std::vector<std::string>* one,
                                  const std::vector<std::vector<std::string>>* many,
                                  std::int64_t block_ms);
  // The master the sentinels name now (the sentinel that answered is asked
  // first next time); kConnectionLost with every sentinel's cause if none did.
  Result<RedisOptions::HostPort> AskSentinels(std::int64_t budget_ms);

  const RedisOptions options_;
  const int io_ms_;  // a command's socket timeout: io_timeout_ms, + the WAIT's
  mutable Mutex master_mu_;
  std::string master_ PYNENC_GUARDED_BY(master_mu_);  // "host:port" last connected (Sentinel)
  std::size_t sentinel_first_ PYNENC_GUARDED_BY(master_mu_) = 0;
  Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ PYNENC_GUARDED_BY(mu_);
  long pid_ PYNENC_GUARDED_BY(mu_);
};

// The Client named by a redis:// BackendConfig. REQUIRES: config.uri is redis.
Result<std::shared_ptr<Client>> OpenClient(const BackendConfig& config);

}  // namespace pynenc_cpp::redis
