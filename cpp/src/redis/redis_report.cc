// redis::Describe: what `pynenc-cpp doctor` shows of a Redis server: version,
// persistence, eviction and replication settings, with a warning for each that
// can lose acknowledged work (docs/backends/redis.md#durability-advice).
#include <map>
#include <stdexcept>
#include <string>

#include "pynenc_cpp/ports/backend_report.h"
#include "redis/redis_client.h"
#include "redis/redis_keys.h"

namespace pynenc_cpp::redis {

namespace {

// "key:value" lines of an INFO reply.
std::map<std::string, std::string> InfoFields(const std::string& text) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) out[line.substr(0, colon)] = line.substr(colon + 1);
  }
  return out;
}

std::string Get(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

// The app's key layout (the state backend's marker), and a warning when it or
// the indexes an earlier version kept show that such a version wrote the app's
// keys (docs/backends/redis.md, "Layout versions and upgrading").
void DescribeLayout(Client& client, const std::string& app_id, BackendReport& report) {
  const std::string state = KeyPrefix(app_id, keys::kState);
  const std::string orchestrator = KeyPrefix(app_id, keys::kOrchestrator);
  Result<std::vector<Value>> r = client.Pipeline({{"GET", state + keys::kLayout},
                                                   {"EXISTS", orchestrator + keys::kTimes},
                                                   {"EXISTS", orchestrator + keys::kSeq}});
  if (!r.ok() || r.value().size() != 3) {
    report.facts.emplace_back("key_layout", "unreadable");
    return;
  }
  for (const Value& v : r.value()) {
    if (v.is_error()) {
      report.facts.emplace_back("key_layout", "unreadable: " + v.str);
      return;
    }
  }
  const Value& marker = r.value()[0];
  // Layout 1 had no marker: an app with invocations and none is of layout 1.
  std::string layout = marker.is_nil() ? (r.value()[2].integer > 0 ? "1" : "") : marker.str;
  if (layout.empty()) {
    report.facts.emplace_back("key_layout", "none yet (nothing of app '" + app_id + "' stored)");
  } else {
    report.facts.emplace_back("key_layout", layout);
    if (layout != kCurrentLayout) {
      report.warnings.push_back("app '" + app_id + "' has key layout " + layout +
                                " and this version writes layout " + kCurrentLayout +
                                ": the keys are upgraded when a component of this version "
                                "opens the app; upgrade every process of the app together");
    }
  }
  if (r.value()[1].integer > 0) {
    report.warnings.push_back(
        "app '" + app_id +
        "' still has indexes an earlier version wrote (orchestrator times, ttimes:<t>, "
        "call:<c>): a process of that version may still be running (its pages, counts and "
        "recovery miss what this version writes); an orchestrator of this version unlinks "
        "them when it opens");
  }
}

}  // namespace

Result<BackendReport> Describe(const BackendConfig& config) {
  Result<std::shared_ptr<Client>> opened = OpenClient(config);
  if (!opened.ok()) return opened.status();
  Client& client = *opened.value();
  BackendReport report;
  report.backend = "redis";
  auto fact = [&report](std::string name, std::string value) {
    report.facts.emplace_back(std::move(name), std::move(value));
  };
  fact("server", client.Describe());

  Result<Value> info = client.Command({"INFO"});
  if (!info.ok()) return info.status();
  if (info.value().is_error()) {
    return client.Failure("INFO", info.value().str);
  }
  const auto fields = InfoFields(info.value().str);
  fact("redis_version", Get(fields, "redis_version"));
  fact("redis_mode", Get(fields, "redis_mode"));
  fact("uptime_in_seconds", Get(fields, "uptime_in_seconds"));
  const std::string aof = Get(fields, "aof_enabled");
  fact("aof_enabled", aof);
  fact("rdb_last_bgsave_status", Get(fields, "rdb_last_bgsave_status"));
  fact("aof_last_write_status", Get(fields, "aof_last_write_status"));

  // CONFIG may be renamed or denied by an ACL: then say so instead of guessing.
  std::map<std::string, std::string> conf;
  std::string conf_error;
  for (const char* key : {"appendfsync", "save", "maxmemory", "maxmemory-policy"}) {
    Result<Value> got = client.Command({"CONFIG", "GET", key});
    if (!got.ok()) return got.status();
    if (got.value().is_error()) {
      conf_error = got.value().str;
      break;
    }
    const auto& els = got.value().elements;
    if (els.size() >= 2) conf[key] = els[1].str;
  }
  if (!conf_error.empty()) {
    fact("config", "unreadable (CONFIG GET refused: " + conf_error + ")");
    report.warnings.push_back(
        "CONFIG GET is refused for this user, so appendfsync and the eviction policy "
        "cannot be checked: check them on the server");
  } else {
    fact("appendfsync", Get(conf, "appendfsync"));
    fact("save", Get(conf, "save").empty() ? "(none)" : Get(conf, "save"));
    fact("maxmemory", Get(conf, "maxmemory"));
    fact("maxmemory-policy", Get(conf, "maxmemory-policy"));
  }

  if (aof != "1") {
    report.errors.push_back(
        "appendonly is off: a restart of the server loses everything written since its last "
        "RDB snapshot" + std::string(Get(conf, "save").empty() && conf_error.empty()
                                         ? " (and no snapshots are configured: everything)"
                                         : "") +
        "; run it with appendonly yes");
  } else if (conf_error.empty() && Get(conf, "appendfsync") == "no") {
    report.warnings.push_back(
        "appendfsync no: the OS decides when writes reach the disk, so a crash of the "
        "machine can lose many seconds of acknowledged work; use everysec or always");
  } else if (conf_error.empty() && Get(conf, "appendfsync") == "everysec") {
    report.warnings.push_back(
        "appendfsync everysec: a crash of the server's machine (not of the process) can "
        "lose up to a second of acknowledged work; always fsyncs every write");
  }
  if (conf_error.empty() && conf.count("maxmemory") && conf.count("maxmemory-policy") &&
      Get(conf, "maxmemory") != "0" && Get(conf, "maxmemory-policy") != "noeviction") {
    report.errors.push_back("maxmemory-policy " + Get(conf, "maxmemory-policy") +
                              " with a memory limit: the server may evict queue entries, "
                              "status records or results; use noeviction");
  }
  // Replication: who acknowledges a write besides this server.
  const RedisOptions& options = client.options();
  const std::string role = Get(fields, "role");
  long replicas = 0;
  try {
    replicas = std::stol(Get(fields, "connected_slaves"));
  } catch (const std::exception&) {
    replicas = 0;
  }
  fact("role", role);
  fact("connected_replicas", std::to_string(replicas));
  const std::string waits =
      options.min_replicas > 0
          ? " (WAIT up to " + std::to_string(options.min_replicas_timeout_ms) +
                " ms after every write)"
          : " (writes do not wait for replicas)";
  fact("min_replicas", std::to_string(options.min_replicas) + waits);
  if (!options.sentinels.empty()) {
    std::string sentinels;
    for (const auto& s : options.sentinels) {
      sentinels += (sentinels.empty() ? "" : ", ") + s.host + ":" + std::to_string(s.port);
    }
    fact("sentinel", "master '" + options.master_name + "' named by " + sentinels);
  }
  if (options.min_replicas > replicas) {
    report.errors.push_back("min_replicas is " + std::to_string(options.min_replicas) + " but " +
                            std::to_string(replicas) +
                            " replica(s) are connected: every write fails until enough are");
  } else if (options.min_replicas == 0 && (replicas > 0 || !options.sentinels.empty())) {
    report.warnings.push_back(
        "writes do not wait for the replicas (cpp_redis_min_replicas=0): a failover to a "
        "replica loses the acknowledged work it had not yet received; set "
        "cpp_redis_min_replicas=1 or more");
  }
  DescribeLayout(client, config.app_id, report);
  for (const char* key : {"rdb_last_bgsave_status", "aof_last_write_status"}) {
    const std::string v = Get(fields, key);
    if (!v.empty() && v != "ok") {
      report.errors.push_back(std::string(key) + " is " + v +
                                ": the server is failing to persist its data");
    }
  }
  return report;
}

}  // namespace pynenc_cpp::redis
