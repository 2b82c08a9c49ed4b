// ClusterNode over real loopback sockets: option checks, standalone mode, three
// nodes in one process electing one master, and a graceful handover. Deadlines
// are generous and polled (a loaded 2-core machine), never fixed sleeps.
#include "pynenc_cpp/cluster/node.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/node/options.h"
#include "net/net_test_util.h"

namespace pynenc_cpp::cluster {
namespace {

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/pynenc_node_test_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<nlohmann::json> ReadLog(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

ClusterOptions Fast() {
  ClusterOptions o;
  o.cluster_name = "node-test";
  o.host = "127.0.0.1";
  o.secret = "node-test-secret";
  // A suspect timeout far above scheduling hiccups of a loaded (sanitized) run,
  // so the view does not flap; the graceful handover does not depend on it.
  o.heartbeat_ms = 100;
  o.suspect_timeout_ms = 1'000;
  o.stabilize_ms = 100;
  o.quorum = 2;
  return o;
}

// Which nodes currently run the work, as seen by the callbacks.
struct WorkTracker {
  std::mutex mu;
  std::set<std::string> running;
  std::vector<std::string> starts;  // node ids in start order
  WorkCallbacks For(const std::string& name) {
    WorkCallbacks w;
    w.start = [this, name](const Activation& a) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_FALSE(a.standalone);
      EXPECT_GT(a.lease_until_mono_ms, 0);
      running.insert(name);
      starts.push_back(name);
    };
    w.stop = [this, name](const Activation&, std::string_view) {
      std::lock_guard<std::mutex> lock(mu);
      running.erase(name);
    };
    return w;
  }
  std::set<std::string> Running() {
    std::lock_guard<std::mutex> lock(mu);
    return running;
  }
};

TEST(ClusterNode, BadOptionsAreBadConfigNamingTheOption) {
  struct Case {
    const char* option;
    std::function<void(ClusterOptions&)> mutate;
  };
  const Case cases[] = {
      {"heartbeat_ms", [](ClusterOptions& o) { o.heartbeat_ms = 0; }},
      {"suspect_timeout_ms", [](ClusterOptions& o) { o.suspect_timeout_ms = o.heartbeat_ms; }},
      {"quorum", [](ClusterOptions& o) { o.quorum = -1; }},
      {"stabilize_ms", [](ClusterOptions& o) { o.stabilize_ms = -5; }},
      {"lease_ms", [](ClusterOptions& o) { o.lease_ms = 10; }},
      {"seeds", [](ClusterOptions& o) { o.seeds = {"127.0.0.1:99999"}; }},
      {"seeds", [](ClusterOptions& o) { o.seeds = {"no-port"}; }},
      {"host", [](ClusterOptions& o) { o.host.clear(), o.seeds = {"127.0.0.1:7000"}; }},
      {"secret", [](ClusterOptions& o) { o.host = "10.1.2.3", o.secret.clear(); }},
      {"secret", [](ClusterOptions& o) { o.secret.clear(); }},  // loopback too: no empty key
      {"cluster_name", [](ClusterOptions& o) { o.cluster_name.clear(); }},
      // Upper bounds (a deadline computed from a larger value could overflow).
      {"heartbeat_ms", [](ClusterOptions& o) { o.heartbeat_ms = INT64_MAX; }},
      {"suspect_timeout_ms", [](ClusterOptions& o) { o.suspect_timeout_ms = INT64_MAX; }},
      {"request_timeout_ms", [](ClusterOptions& o) { o.request_timeout_ms = INT64_MAX; }},
      {"leave_timeout_ms", [](ClusterOptions& o) { o.leave_timeout_ms = kMaxTimeoutMs + 1; }},
      {"max_frame_bytes", [](ClusterOptions& o) { o.max_frame_bytes = 10; }},
      {"send_queue_bound", [](ClusterOptions& o) { o.send_queue_bound = 0; }},
      {"election_class",
       [](ClusterOptions& o) { o.election = ElectionKind::kHrw, o.election_class = "x"; }},
      {"activation_log", [](ClusterOptions& o) { o.activation_log = "/nonexistent/dir/log"; }},
      {"node_class", [](ClusterOptions& o) { o.node_class = std::string(300, 'c'); }},
      {"metadata", [](ClusterOptions& o) { o.metadata["k"] = std::string(5000, 'v'); }},
      {"metadata", [](ClusterOptions& o) { o.metadata[""] = "empty key"; }},
      {"metadata",
       [](ClusterOptions& o) {
         for (int i = 0; i < 65; ++i) o.metadata["k" + std::to_string(i)] = "v";
       }},
  };
  for (const auto& c : cases) {
    ClusterOptions o = Fast();
    c.mutate(o);
    bool started = false;
    auto r = ClusterNode::Start(o, {[&](const Activation&) { started = true; }, {}}, {});
    ASSERT_FALSE(r.ok()) << c.option;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig) << c.option;
    EXPECT_EQ(r.status().message().rfind(c.option, 0), 0u)
        << c.option << ": " << r.status().message();
    EXPECT_FALSE(started);
  }
}

TEST(ClusterNodeOptions, DefaultQuorumIsAMajorityOfSeedsPlusSelf) {
  ClusterOptions o = Fast();
  o.quorum = 0;
  EXPECT_EQ(EffectiveQuorum(o, "127.0.0.1:1"), 1);
  o.seeds = {"127.0.0.1:2", "127.0.0.1:3"};
  EXPECT_EQ(EffectiveQuorum(o, "127.0.0.1:1"), 2);
  EXPECT_EQ(EffectiveQuorum(o, "127.0.0.1:2"), 2);  // self among the seeds: 2 distinct
  o.seeds = {"127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:4"};
  EXPECT_EQ(EffectiveQuorum(o, "127.0.0.1:1"), 3);
  o.quorum = 5;
  EXPECT_EQ(EffectiveQuorum(o, "127.0.0.1:1"), 5);
}

TEST(ClusterNodeOptions, SeedsMergeWithCachedPeersWithoutSelfOrDuplicates) {
  EXPECT_EQ(MergeSeeds({"a:1", "b:1", "a:1"}, {"c:1", "b:1", "self:1"}, "self:1"),
            (std::vector<Address>{"a:1", "b:1", "c:1"}));
  EXPECT_TRUE(IsStandalone(ClusterOptions{}));
  ClusterOptions with_host;
  with_host.host = "127.0.0.1";
  EXPECT_FALSE(IsStandalone(with_host));
}

TEST(ClusterNode, UnwritableStateDirIsBadConfig) {
  TempDir dir;
  const std::string file = dir.path() + "/plain-file";
  std::ofstream(file) << "x";
  ClusterOptions o = Fast();
  o.state_dir = file + "/state";  // under a regular file: cannot be created
  auto r = ClusterNode::Start(o, {}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(r.status().message().find("state dir not writable"), std::string::npos)
      << r.status().message();
}

TEST(ClusterNode, PortInUseIsBackendFailure) {
  auto a = ClusterNode::Start(Fast(), {}, {});
  ASSERT_TRUE(a.ok()) << a.status().message();
  const std::string addr = a.value()->Status().address;
  ClusterOptions o = Fast();
  o.port = static_cast<std::uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
  auto b = ClusterNode::Start(o, {}, {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::kBackendFailure) << b.status().message();
  a.value()->Stop();
}

TEST(ClusterNode, StandaloneRunsTheWorkAtOnceAndStopsIt) {
  TempDir dir;
  ClusterOptions o;  // no host, no seeds
  o.activation_log = dir.path() + "/activations.jsonl";
  o.state_dir = dir.path() + "/state";
  std::atomic<int> started{0}, stopped{0};
  std::string stop_reason;
  WorkCallbacks w;
  w.start = [&](const Activation& a) {
    EXPECT_TRUE(a.standalone);
    ++started;
  };
  w.stop = [&](const Activation& a, std::string_view reason) {
    EXPECT_TRUE(a.standalone);
    stop_reason = std::string(reason);
    ++stopped;
  };
  auto node = ClusterNode::Start(o, w, {});
  ASSERT_TRUE(node.ok()) << node.status().message();
  EXPECT_TRUE(WaitFor([&] { return started == 1; }, std::chrono::seconds(10)));
  NodeStatus s = node.value()->Status();
  EXPECT_TRUE(s.standalone);
  EXPECT_EQ(s.id.size(), 32u);
  node.value()->Stop();
  node.value()->Stop();  // idempotent
  EXPECT_EQ(stopped, 1);
  EXPECT_EQ(stop_reason, "shutdown");
  auto log = ReadLog(o.activation_log);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["event"], "start");
  EXPECT_EQ(log[1]["event"], "stop");
  EXPECT_EQ(log[0]["node"], s.id);
  EXPECT_EQ(log[0]["pid"], static_cast<std::int64_t>(::getpid()));
}

TEST(ClusterNode, StateDirKeepsTheIdAndBumpsTheIncarnation) {
  TempDir dir;
  ClusterOptions o = Fast();
  o.quorum = 1;
  o.state_dir = dir.path() + "/state";
  NodeId first_id;
  std::uint64_t first_inc = 0;
  {
    auto a = ClusterNode::Start(o, {}, {});
    ASSERT_TRUE(a.ok()) << a.status().message();
    first_id = a.value()->Status().id;
    first_inc = a.value()->Status().incarnation;
  }
  auto b = ClusterNode::Start(o, {}, {});
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b.value()->Status().id, first_id);
  EXPECT_GT(b.value()->Status().incarnation, first_inc);
}

// The live peers land in the state dir's peers file (written on the callback
// thread, not the network loop), so a restart finds them without its seeds.
TEST(ClusterNode, LivePeersAreWrittenToTheStateDir) {
  TempDir dir;
  ClusterOptions oa = Fast();
  oa.state_dir = dir.path() + "/a";
  auto a = ClusterNode::Start(oa, {}, {});
  ASSERT_TRUE(a.ok()) << a.status().message();
  const Address a_address = a.value()->Status().address;
  ClusterOptions ob = Fast();
  ob.state_dir = dir.path() + "/b";
  ob.seeds = {a_address};
  auto b = ClusterNode::Start(ob, {}, {});
  ASSERT_TRUE(b.ok()) << b.status().message();
  const Address b_address = b.value()->Status().address;
  auto file_has = [](const std::string& path, const std::string& line) {
    std::ifstream in(path);
    std::string l;
    while (std::getline(in, l)) {
      if (l == line) return true;
    }
    return false;
  };
  EXPECT_TRUE(WaitFor([&] { return file_has(ob.state_dir + "/peers", a_address); },
                      std::chrono::seconds(20)));
  EXPECT_TRUE(WaitFor([&] { return file_has(oa.state_dir + "/peers", b_address); },
                      std::chrono::seconds(20)));
  b.value()->Stop();
  a.value()->Stop();
}

TEST(ClusterNode, ThreeNodesOneMasterThenGracefulHandover) {
  TempDir dir;
  const std::string log_path = dir.path() + "/activations.jsonl";
  WorkTracker work;
  std::mutex ev_mu;
  std::map<std::string, int> joined;             // observer -> joined events
  std::map<std::string, std::set<NodeId>> left;  // observer -> ids seen leaving
  auto events_for = [&](const std::string& name) {
    return [&, name](const MemberEvent& e) {
      std::lock_guard<std::mutex> lock(ev_mu);
      if (e.kind == MemberEventKind::kJoined) ++joined[name];
      if (e.kind == MemberEventKind::kLeft) left[name].insert(e.member.id);
    };
  };
  std::vector<std::unique_ptr<ClusterNode>> nodes;
  ClusterOptions first = Fast();
  first.activation_log = log_path;
  auto n0 = ClusterNode::Start(first, work.For("n0"), events_for("n0"));
  ASSERT_TRUE(n0.ok()) << n0.status().message();
  nodes.push_back(std::move(n0).value());
  const Address seed = nodes[0]->Status().address;
  for (const char* name : {"n1", "n2"}) {
    ClusterOptions o = Fast();
    o.seeds = {seed};
    o.activation_log = log_path;
    auto n = ClusterNode::Start(o, work.For(name), events_for(name));
    ASSERT_TRUE(n.ok()) << n.status().message();
    nodes.push_back(std::move(n).value());
  }
  std::map<std::string, int> index{{"n0", 0}, {"n1", 1}, {"n2", 2}};

  // Exactly one node runs the work, and every node agrees on the leader.
  // The start callback runs while its node is still activating; the node
  // reports master once the callback has returned, so wait for that too.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = work.Running();
        if (r.size() != 1) return false;
        if (nodes[index[*r.begin()]]->Status().state != SupervisorState::kMaster) return false;
        std::set<std::optional<NodeId>> leaders;
        for (auto& n : nodes) leaders.insert(n->Status().leader);
        return leaders.size() == 1 && nodes[0]->Members().size() == 3;
      },
      std::chrono::seconds(20)));
  const std::string master = *work.Running().begin();
  ClusterNode& m = *nodes[index[master]];
  EXPECT_EQ(m.Status().state, SupervisorState::kMaster);
  EXPECT_EQ(m.Status().leader, m.Status().id);
  EXPECT_TRUE(m.Status().has_quorum);
  {
    std::lock_guard<std::mutex> lock(ev_mu);
    for (const char* name : {"n0", "n1", "n2"}) EXPECT_EQ(joined[name], 2) << name;
  }

  // Graceful stop of the master: another takes over, well before the lease
  // (= suspect timeout) would have run out on its own plus detection.
  const auto stop_at = std::chrono::steady_clock::now();
  m.Stop();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = work.Running();
        return r.size() == 1 && *r.begin() != master;
      },
      std::chrono::seconds(20)));
  const auto takeover = std::chrono::steady_clock::now() - stop_at;
  EXPECT_LT(takeover, std::chrono::seconds(5));
  // The survivors saw the Leaving, and list the old master as left.
  const NodeId old_id = m.Status().id;
  EXPECT_EQ(m.Status().state, SupervisorState::kStopping);
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(ev_mu);
        for (const auto& [name, i] : index) {
          if (name != master && !left[name].count(old_id)) return false;
        }
        return true;
      },
      std::chrono::seconds(10)));
  for (const auto& [name, i] : index) {
    if (name == master) continue;
    for (const auto& mem : nodes[i]->Members()) {
      if (mem.id == old_id) EXPECT_EQ(mem.state, MemberState::kLeft) << name;
    }
  }
  {
    std::lock_guard<std::mutex> lock(work.mu);
    EXPECT_GE(work.starts.size(), 2u);
  }
  for (auto& n : nodes) n->Stop();

  // The activation log: every start follows a "lease" record of the same node
  // covering it (write-ahead), the old master's stop precedes the new start,
  // and the new start came after the old lease ended (released or expired).
  auto log = ReadLog(log_path);
  std::map<std::string, std::int64_t> lease_until, lease_end;
  std::vector<nlohmann::json> starts, stops;
  for (const auto& r : log) {
    const std::string node = r["node"];
    const std::string ev = r["event"];
    if (ev == "lease") {
      lease_until[node] = std::max<std::int64_t>(lease_until[node], r["lease_until_mono_ms"]);
      lease_end[node] = lease_until[node];
    } else if (ev == "release") {
      lease_end[node] = r["mono_ms"];
    } else if (ev == "start") {
      EXPECT_GE(lease_until[node], r["lease_until_mono_ms"].get<std::int64_t>());
      for (const auto& [other, end] : lease_end) {
        if (other != node) EXPECT_GE(r["mono_ms"].get<std::int64_t>(), end) << other;
      }
      starts.push_back(r);
    } else if (ev == "stop") {
      stops.push_back(r);
    }
  }
  ASSERT_GE(starts.size(), 2u);
  ASSERT_GE(stops.size(), 2u);
  EXPECT_EQ(stops[0]["node"], starts[0]["node"]);
  EXPECT_EQ(stops[0]["reason"], "shutdown");
  EXPECT_LE(stops[0]["mono_ms"].get<std::int64_t>(), starts[1]["mono_ms"].get<std::int64_t>());
  std::printf("graceful handover: %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(takeover).count()));
}

TEST(ClusterNode, CallbackExceptionsDoNotKillTheNode) {
  WorkCallbacks w;
  std::atomic<int> starts{0};
  w.start = [&](const Activation&) {
    ++starts;
    throw std::runtime_error("boom");
  };
  w.stop = [](const Activation&, std::string_view) { throw std::runtime_error("boom"); };
  ClusterOptions o = Fast();
  o.quorum = 1;
  auto n = ClusterNode::Start(o, w, {});
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_TRUE(WaitFor([&] { return starts == 1; }, std::chrono::seconds(20)));
  n.value()->Stop();  // returns although stop threw
  EXPECT_EQ(n.value()->Status().state, SupervisorState::kStopping);
}

TEST(ClusterNode, StopFromInsideTheStartCallbackDoesNotDeadlock) {
  std::atomic<ClusterNode*> self{nullptr};
  std::atomic<int> stops{0};
  std::atomic<bool> stop_returned{false};
  WorkCallbacks w;
  w.start = [&](const Activation&) {
    ASSERT_TRUE(WaitFor([&] { return self.load() != nullptr; }, std::chrono::seconds(20)));
    self.load()->Stop();  // runs the queued stop callback itself
    stop_returned = true;
  };
  w.stop = [&](const Activation&, std::string_view reason) {
    EXPECT_EQ(reason, "shutdown");
    ++stops;
  };
  ClusterOptions o = Fast();
  o.quorum = 1;
  auto n = ClusterNode::Start(o, w, {});
  ASSERT_TRUE(n.ok()) << n.status().message();
  self = n.value().get();
  ASSERT_TRUE(WaitFor([&] { return stop_returned.load(); }, std::chrono::seconds(30)));
  EXPECT_EQ(stops, 1);
  EXPECT_EQ(n.value()->Status().state, SupervisorState::kStopping);
  n.value()->Stop();  // idempotent from another thread too
  EXPECT_EQ(stops, 1);
}

// Log lines reach the LogCallback on the callback thread (never the caller's or the
// network loop's), and a stalled callback holds at most kMaxPendingLogLines: the
// rest are dropped and counted in a Warning delivered before the next line.
TEST(ClusterNode, LogLinesReachTheCallbackWithABoundedBacklog) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<std::pair<LogLevel, std::string>> lines;
  std::set<std::thread::id> threads;
  LogCallback log = [&](LogLevel level, std::string_view line) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });  // stalled until the test releases it
    lines.emplace_back(level, std::string(line));
    threads.insert(std::this_thread::get_id());
  };
  ClusterOptions o = Fast();
  o.quorum = 1;
  o.refusal_logs_per_second = 1'000'000;  // every refusal logged: the backlog overflows
  WorkTracker work;
  auto node = ClusterNode::Start(o, work.For("a"), {}, log);
  ASSERT_TRUE(node.ok()) << node.status().message();
  const std::uint16_t port = nettest::PortOf(node.value()->Status().address);
  // Each garbage connection is refused and logged: far more than the backlog holds.
  const int kConnections = kMaxPendingLogLines + 200;
  for (int i = 0; i < kConnections; ++i) {
    nettest::RawClient c(port);
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Send(std::string("\x00\x00\x00\x07\x09garbage", 11)));
    // Wait for the node to read it and close: one refusal logged per connection.
    ASSERT_FALSE(c.ReadFrame(std::chrono::seconds(20)).has_value());
  }
  ASSERT_TRUE(WaitFor([&] { return node.value()->Status().transport.frames_malformed +
                                       node.value()->Status().transport.handshakes_rejected >=
                                   static_cast<std::uint64_t>(kConnections); },
                      std::chrono::seconds(60)));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  node.value()->Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_LE(lines.size(), static_cast<std::size_t>(kMaxPendingLogLines) + 16);
  int refused = 0;
  bool dropped_reported = false;
  for (const auto& [level, line] : lines) {
    if (line.find("refused connection") != std::string::npos) {
      EXPECT_EQ(level, LogLevel::kWarning);
      ++refused;
    }
    if (line.find("log lines dropped") != std::string::npos) dropped_reported = true;
  }
  EXPECT_GT(refused, 0);
  EXPECT_LT(refused, kConnections);
  EXPECT_TRUE(dropped_reported) << lines.size() << " lines, " << refused << " refused";
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

// Opens connections to `port` from 127.0.0.2-127.0.0.9 (so the per-source and the
// global pending-handshake caps are both exercised, and the legitimate peers on
// 127.0.0.1 have a source of their own): about 1000 a second, up to `keep_open`
// held idle at once, one in three sending junk (garbage, an oversized header, a
// malformed hello, a frame in clear) before going idle. Runs until `stop`.
void Flood(std::uint16_t port, std::atomic<bool>& stop, std::atomic<int>& opened,
           std::size_t keep_open) {
  const std::string junk[] = {
      std::string("GET / HTTP/1.1\r\n\r\n"),
      std::string("\x7f\xff\xff\xff", 4),
      transport::EncodeFrame(transport::kHello, "short"),
      transport::EncodeFrame(40, "a protocol frame in clear"),
  };
  std::deque<int> fds;
  for (int i = 0; !stop.load(); ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) break;
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl(0x7f000002 + (i % 8));
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) == 0) {
      (void)::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst);  // EINPROGRESS
      if (i % 3 == 0) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, 100) == 1) {
          const std::string& j = junk[(i / 3) % 4];
          (void)::send(fd, j.data(), j.size(), MSG_NOSIGNAL);
        }
      }
      ++opened;
    }
    fds.push_back(fd);
    while (fds.size() > keep_open) {
      ::close(fds.front());
      fds.pop_front();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int fd : fds) ::close(fd);
}

TEST(ClusterNode, AFloodOfIdleSocketsAndJunkKeepsNeitherAJoinNorTheLeaseRenewalOut) {
  std::mutex log_mu;
  int refusal_lines = 0;
  LogCallback log = [&](LogLevel, std::string_view line) {
    std::lock_guard<std::mutex> lock(log_mu);
    if (line.find("connection from") != std::string::npos) ++refusal_lines;
  };
  WorkTracker work;
  std::vector<std::unique_ptr<ClusterNode>> nodes;
  auto n0 = ClusterNode::Start(Fast(), work.For("n0"), {}, log);
  ASSERT_TRUE(n0.ok()) << n0.status().message();
  nodes.push_back(std::move(n0).value());
  const Address seed = nodes[0]->Status().address;
  ClusterOptions o1 = Fast();
  o1.seeds = {seed};
  auto n1 = ClusterNode::Start(o1, work.For("n1"), {});
  ASSERT_TRUE(n1.ok()) << n1.status().message();
  nodes.push_back(std::move(n1).value());
  ASSERT_TRUE(WaitFor([&] { return work.Running().size() == 1; }, std::chrono::seconds(20)));
  const std::string master = *work.Running().begin();
  ClusterNode& m = *nodes[master == "n0" ? 0 : 1];
  ASSERT_TRUE(WaitFor([&] { return m.Status().state == SupervisorState::kMaster; },
                      std::chrono::seconds(20)));

  // Flood the seed (which every joiner dials) with 300 idle sockets and junk.
  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};
  std::thread flood(Flood, nettest::PortOf(seed), std::ref(stop), std::ref(opened), 300);
  ASSERT_TRUE(WaitFor([&] { return opened.load() >= 300; }, std::chrono::seconds(20)));
  const auto flood_started = std::chrono::steady_clock::now();
  const std::int64_t lease_before = m.Status().lease_until_mono_ms;

  // A third node joins through the flooded seed.
  ClusterOptions o2 = Fast();
  o2.seeds = {seed};
  auto n2 = ClusterNode::Start(o2, work.For("n2"), {});
  ASSERT_TRUE(n2.ok()) << n2.status().message();
  nodes.push_back(std::move(n2).value());
  const bool joined = WaitFor(
      [&] {
        for (auto& n : nodes) {
          std::size_t alive = 0;
          for (const auto& mem : n->Members()) alive += mem.state == MemberState::kAlive ? 1 : 0;
          if (alive != 3) return false;
        }
        return true;
      },
      std::chrono::seconds(20));
  // Keep flooding for at least 3 s (several lease renewals) before judging.
  std::this_thread::sleep_until(flood_started + std::chrono::seconds(3));
  const auto master_status = m.Status();
  const int flood_connections = opened.load();
  const double flood_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - flood_started).count();
  stop = true;
  flood.join();

  EXPECT_TRUE(joined) << "the third node joined through the flooded seed";
  EXPECT_EQ(master_status.state, SupervisorState::kMaster) << "the master kept its lease";
  EXPECT_GT(master_status.lease_until_mono_ms, lease_before + 1'000) << "and renewed it";
  {
    std::lock_guard<std::mutex> lock(work.mu);
    EXPECT_EQ(work.starts.size(), 1u) << "no failover, no second start";
  }
  EXPECT_GE(nodes[0]->Status().transport.handshakes_rejected, 300u) << "the flood was refused";
  {
    std::lock_guard<std::mutex> lock(log_mu);
    // refusal_logs_per_second = 10, plus a line per window saying how many were not.
    EXPECT_LE(refusal_lines, static_cast<int>(11 * (flood_seconds + 2)))
        << flood_connections << " connections";
    std::printf("flood: %d connections in %.1f s, %llu refused, %d refusal lines logged\n",
                flood_connections, flood_seconds,
                static_cast<unsigned long long>(nodes[0]->Status().transport.handshakes_rejected),
                refusal_lines);
  }
  for (auto& n : nodes) n->Stop();
}

}  // namespace
}  // namespace pynenc_cpp::cluster
