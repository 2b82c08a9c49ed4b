// Engine-level benchmark of the durable backends against the raw database,
// measured side by side in one process (not a test; run via bench/backends.py).
//
// For each backend it measures
//   transitions  one cycle = register an invocation, then PENDING -> RUNNING ->
//                SUCCESS through the Orchestrator port (4 atomic operations)
//   route        one op = Broker::Route of one id + Retrieve of it (2 operations)
// and beside it the raw baseline doing the same number of single-row
// transactions with the same pragmas, straight on libsqlite3:
//   raw transitions: INSERT + 3 x (SELECT status + UPDATE) transactions
//   raw route:       INSERT transaction + DELETE ... RETURNING transaction
// Output: one JSON object per line: {"backend", "scenario", "engine", "raw"} (ops/s).
#include <hiredis/hiredis.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "pynenc_cpp/ports/broker.h"
#include "pynenc_cpp/ports/orchestrator.h"

namespace {

using pynenc_cpp::BackendConfig;
using pynenc_cpp::InvocationId;
using pynenc_cpp::InvocationStatus;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench failure: %s\n", what);
    std::exit(1);
  }
}

double EngineTransitions(const BackendConfig& config, int n) {
  auto opened = pynenc_cpp::OpenOrchestrator(config);
  Check(opened.ok(), opened.status().ToString().c_str());
  auto& orch = *opened.value();
  const std::string runner = "bench-runner";
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    InvocationId id("inv-" + std::to_string(i));
    Check(orch.RegisterInvocations({{id, pynenc_cpp::TaskId("m.t"), pynenc_cpp::CallId("m.t:a")}},
                                   std::nullopt)
              .ok(),
          "register");
    Check(orch.TransitionStatus(id, InvocationStatus::kPending, runner).ok(), "pending");
    Check(orch.TransitionStatus(id, InvocationStatus::kRunning, runner).ok(), "running");
    Check(orch.TransitionStatus(id, InvocationStatus::kSuccess, runner).ok(), "success");
  }
  return n / Seconds(start);
}

double EngineRoute(const BackendConfig& config, int n) {
  auto opened = pynenc_cpp::OpenBroker(config);
  Check(opened.ok(), opened.status().ToString().c_str());
  auto& broker = *opened.value();
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    Check(broker.Route({InvocationId("inv-" + std::to_string(i))}, "q", 0).ok(), "route");
    auto got = broker.Retrieve("q", 0);
    Check(got.ok() && got.value().has_value(), "retrieve");
  }
  return n / Seconds(start);
}

// ---- raw libsqlite3, same pragmas, prepared statements ----------------------

struct Raw {
  sqlite3* db = nullptr;
  explicit Raw(const std::string& path) {
    Check(sqlite3_open(path.c_str(), &db) == SQLITE_OK, "raw open");
    Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    sqlite3_busy_timeout(db, 5000);
  }
  ~Raw() { sqlite3_close_v2(db); }
  void Exec(const char* sql) { Check(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == 0, sql); }
  sqlite3_stmt* Prep(const char* sql) {
    sqlite3_stmt* s = nullptr;
    Check(sqlite3_prepare_v2(db, sql, -1, &s, nullptr) == SQLITE_OK, sql);
    return s;
  }
  static void Done(sqlite3_stmt* s) {
    while (sqlite3_step(s) == SQLITE_ROW) {
    }
    sqlite3_reset(s);
  }
};

double RawTransitions(const std::string& path, int n) {
  Raw raw(path);
  raw.Exec("CREATE TABLE inv (id TEXT PRIMARY KEY, status TEXT, owner TEXT, ts INTEGER)");
  sqlite3_stmt* begin = raw.Prep("BEGIN IMMEDIATE");
  sqlite3_stmt* commit = raw.Prep("COMMIT");
  sqlite3_stmt* ins = raw.Prep("INSERT INTO inv VALUES (?, 'registered', NULL, 0)");
  sqlite3_stmt* sel = raw.Prep("SELECT status, owner FROM inv WHERE id = ?");
  sqlite3_stmt* upd = raw.Prep("UPDATE inv SET status = ?, owner = ?, ts = ? WHERE id = ?");
  const char* next[] = {"pending", "running", "success"};
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    const std::string id = "inv-" + std::to_string(i);
    Raw::Done(begin);
    sqlite3_bind_text(ins, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    Raw::Done(ins);
    Raw::Done(commit);
    for (const char* status : next) {
      Raw::Done(begin);
      sqlite3_bind_text(sel, 1, id.c_str(), -1, SQLITE_TRANSIENT);
      Check(sqlite3_step(sel) == SQLITE_ROW, "raw select");
      sqlite3_reset(sel);
      sqlite3_bind_text(upd, 1, status, -1, SQLITE_STATIC);
      sqlite3_bind_text(upd, 2, "bench-runner", -1, SQLITE_STATIC);
      sqlite3_bind_int64(upd, 3, i);
      sqlite3_bind_text(upd, 4, id.c_str(), -1, SQLITE_TRANSIENT);
      Raw::Done(upd);
      Raw::Done(commit);
    }
  }
  const double rate = n / Seconds(start);
  for (sqlite3_stmt* s : {begin, commit, ins, sel, upd}) sqlite3_finalize(s);
  return rate;
}

double RawRoute(const std::string& path, int n) {
  Raw raw(path);
  raw.Exec(
      "CREATE TABLE q (seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT, priority REAL, id TEXT);"
      "CREATE INDEX q_pop ON q (queue, priority DESC, seq);");
  sqlite3_stmt* begin = raw.Prep("BEGIN IMMEDIATE");
  sqlite3_stmt* commit = raw.Prep("COMMIT");
  sqlite3_stmt* ins = raw.Prep("INSERT INTO q (queue, priority, id) VALUES ('q', 0, ?)");
  sqlite3_stmt* pop = raw.Prep(
      "DELETE FROM q WHERE seq = (SELECT seq FROM q WHERE queue = 'q'"
      " ORDER BY priority DESC, seq LIMIT 1) RETURNING id");
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    const std::string id = "inv-" + std::to_string(i);
    Raw::Done(begin);
    sqlite3_bind_text(ins, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    Raw::Done(ins);
    Raw::Done(commit);
    Raw::Done(begin);
    Check(sqlite3_step(pop) == SQLITE_ROW, "raw pop");
    sqlite3_reset(pop);
    Raw::Done(commit);
  }
  const double rate = n / Seconds(start);
  for (sqlite3_stmt* s : {begin, commit, ins, pop}) sqlite3_finalize(s);
  return rate;
}

// ---- raw hiredis, same round trips as the engine ----------------------------
// transitions: HSET (register) + 3 x (HGETALL + HSET), the engine's read + CAS.
// route:       RPUSH + LMOVE into a processing list (a reliable pop).

struct RawRedis {
  redisContext* c = nullptr;
  explicit RawRedis(int port) {
    c = redisConnect("127.0.0.1", port);
    Check(c != nullptr && c->err == 0, "raw redis connect");
  }
  ~RawRedis() { redisFree(c); }
  void Cmd(const char* fmt, const std::string& a, const std::string& b = "") {
    auto* r = static_cast<redisReply*>(redisCommand(c, fmt, a.c_str(), b.c_str()));
    Check(r != nullptr && r->type != REDIS_REPLY_ERROR, fmt);
    freeReplyObject(r);
  }
};

double RawRedisTransitions(int port, int n) {
  RawRedis raw(port);
  const char* next[] = {"pending", "running", "success"};
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    const std::string key = "raw:inv:" + std::to_string(i);
    raw.Cmd("HSET %s status registered task m.t owner %s", key, "");
    for (const char* status : next) {
      raw.Cmd("HGETALL %s", key);
      raw.Cmd("HSET %s status %s owner bench-runner", key, status);
    }
  }
  return n / Seconds(start);
}

double RawRedisRoute(int port, int n) {
  RawRedis raw(port);
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    raw.Cmd("RPUSH raw:q %s", "inv-" + std::to_string(i));
    raw.Cmd("LMOVE raw:q raw:processing:%s LEFT RIGHT", "me");
  }
  return n / Seconds(start);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 5000;
  std::string pattern = (std::filesystem::temp_directory_path() / "pynenc-bench-XXXXXX").string();
  const std::string dir = mkdtemp(pattern.data());
  const BackendConfig sqlite{"sqlite://" + dir + "/engine.db", "bench", nullptr};
  const BackendConfig mem{"memory://", "bench", nullptr};

  std::printf(
      "{\"backend\": \"sqlite\", \"scenario\": \"transitions\", \"engine\": %.1f, \"raw\": %.1f}\n",
      EngineTransitions(sqlite, n), RawTransitions(dir + "/raw_t.db", n));
  std::printf(
      "{\"backend\": \"sqlite\", \"scenario\": \"route\", \"engine\": %.1f, \"raw\": %.1f}\n",
      EngineRoute(sqlite, n), RawRoute(dir + "/raw_r.db", n));
  if (argc > 2) {  // a redis-server port, started by bench/backends.py
    const int port = std::atoi(argv[2]);
    const BackendConfig redis{"redis://127.0.0.1:" + std::to_string(port) + "/0", "bench", nullptr};
    std::printf(
        "{\"backend\": \"redis\", \"scenario\": \"transitions\", \"engine\": %.1f, \"raw\": "
        "%.1f}\n",
        EngineTransitions(redis, n), RawRedisTransitions(port, n));
    std::printf(
        "{\"backend\": \"redis\", \"scenario\": \"route\", \"engine\": %.1f, \"raw\": %.1f}\n",
        EngineRoute(redis, n), RawRedisRoute(port, n));
  }
  std::printf(
      "{\"backend\": \"mem\", \"scenario\": \"transitions\", \"engine\": %.1f, \"raw\": null}\n",
      EngineTransitions(mem, n));
  std::printf("{\"backend\": \"mem\", \"scenario\": \"route\", \"engine\": %.1f, \"raw\": null}\n",
              EngineRoute(mem, n));
  std::filesystem::remove_all(dir);
  return 0;
}
