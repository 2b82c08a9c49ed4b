// Host unit tests: one node's Host on a SimEnv with a real OwnerLeases of
// quorum 1 (a view of only itself), driven the way NodeCore drives it
// (CheckExpiry before and AfterEvent after every event). The "leader" is a
// second SimEnv whose receiver collects the acks and reports; the start/stop
// hooks record their calls and the test answers Started/Stopped.
#include "cluster/singletons/host.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/coordinator/messages.h"
#include "cluster/singletons/owner_leases.h"
#include "sim/sim.h"

namespace pynenc_cpp::cluster {
namespace {

namespace cw = coord_wire;
using cw::Command;
using cw::InstancePhase;

constexpr std::int64_t kHeartbeat = 100;
constexpr std::int64_t kLeaseMs = 1000;
constexpr std::int64_t kMargin = 10;
constexpr std::int64_t kStabilize = 300;
const NodeId kSelf = "h0000000000000000000000000000000";
const Address kSelfAddr = "10.0.4.1:7000";
const Address kLeaderAddr = "10.0.4.9:7000";

struct StartCall {
  InstanceContext ctx;
  std::int64_t at = 0;
};
struct StopCall {
  std::string label;
  Generation generation;
  std::string reason;
  std::int64_t at = 0;
};

// Runs every timer callback between `before` and `after`, as NodeCore's
// GuardedEnv runs it inside Guarded (CheckExpiry before, AfterEvent after).
// Counts the timer events; past `limit` it stops guarding them, so that a
// timer that re-arms itself at once cannot hang the test.
class GuardEnv final : public Env {
 public:
  explicit GuardEnv(Env& base) : base_(base) {}
  std::int64_t NowMs() override { return base_.NowMs(); }
  std::int64_t WallMs() override { return base_.WallMs(); }
  std::uint64_t Random() override { return base_.Random(); }
  TimerId After(std::int64_t delay_ms, std::function<void()> fn) override {
    return base_.After(delay_ms, [this, fn = std::move(fn)] {
      if (++events > limit) {
        overflow = true;
        return fn();
      }
      if (before) before();
      fn();
      if (after) after();
    });
  }
  void Cancel(TimerId id) override { base_.Cancel(id); }
  void Send(const Address& to, std::uint8_t type, std::string payload) override {
    base_.Send(to, type, std::move(payload));
  }
  void SetReceiver(Receiver r) override { base_.SetReceiver(std::move(r)); }
  Address LocalAddress() const override { return base_.LocalAddress(); }
  void Log(LogLevel level, std::string_view message) override { base_.Log(level, message); }

  std::function<void()> before, after;
  std::int64_t events = 0;
  std::int64_t limit = 20'000;
  bool overflow = false;

 private:
  Env& base_;
};

class HostTest : public ::testing::Test {
 protected:
  explicit HostTest(std::int64_t stop_lead_ms = 0, bool guarded = false)
      : stop_lead_ms_(stop_lead_ms), guarded_(guarded) {}

  void SetUp() override {
    world_.SetFaults({0, 0, 0, 1, 5});
    Env* base = &world_.AddNode(kSelfAddr);
    if (guarded_) {
      guard_ = std::make_unique<GuardEnv>(*base);
      guard_->before = [this] {
        if (host_) host_->CheckExpiry();
      };
      guard_->after = [this] {
        if (host_) host_->AfterEvent();
      };
      base = guard_.get();
    }
    Env& env = *base;
    env_ = &env;
    Env& leader = world_.AddNode(kLeaderAddr);
    leader.SetReceiver([this](const Address& from, std::uint8_t type, std::string payload) {
      EXPECT_EQ(from, kSelfAddr);
      auto m = cw::Decode(type, payload);
      ASSERT_TRUE(m.ok()) << m.status().message();
      if (auto* ack = std::get_if<cw::Ack>(&m.value())) acks_.push_back(*ack);
      if (auto* rep = std::get_if<cw::Report>(&m.value())) reports_.push_back(*rep);
    });
    OwnerLeaseOptions lo;
    lo.self_id = kSelf;
    lo.heartbeat_ms = kHeartbeat;
    lo.lease_ms = kLeaseMs;
    leases_ = std::make_unique<OwnerLeases>(env, lo, nullptr);
    leases_->SetView({Member{kSelf, kSelfAddr}}, 1);
    leases_->Start();

    HostOptions ho;
    ho.self_id = kSelf;
    ho.stabilize_ms = kStabilize;
    ho.report_interval_ms = 2'000;
    ho.stop_lead_ms = stop_lead_ms_;
    HostHooks hooks;
    hooks.start = [this](const InstanceContext& ctx) { starts_.push_back({ctx, Now()}); };
    hooks.stop = [this](const std::string& label, Generation g, const std::string& reason) {
      stops_.push_back({label, g, reason, Now()});
    };
    hooks.regrant = [this](const std::string& label, Generation g) {
      regrants_.emplace_back(label, g);
    };
    hooks.record = [this](const InstanceRecord& r) { records_.push_back(r); };
    host_ = std::make_unique<Host>(env, *leases_, ho, hooks);
    host_->SetActorTypes({"worker", "storage"});
    host_->Start();
    // Past the owner leases' restart guard.
    world_.RunFor(kLeaseMs);
  }

  void TearDown() override {
    // Every spawn and every stop got exactly one ack.
    Advance(10);
    std::map<std::uint64_t, int> count;
    for (const auto& a : acks_) ++count[a.request_id];
    for (const auto& [id, n] : sent_) {
      EXPECT_EQ(count[id], 1) << "request " << id << " (" << n << ") acked " << count[id]
                              << " times";
    }
    for (const auto& [id, n] : count) EXPECT_TRUE(sent_.count(id)) << "ack for unknown " << id;
  }

  std::int64_t Now() const { return world_.Now(); }

  // One event as NodeCore runs it.
  void Step(const std::function<void()>& event) {
    host_->CheckExpiry();
    event();
    host_->AfterEvent();
  }
  // Virtual time in 1 ms steps, each followed by the checks NodeCore runs
  // around the timers that fired.
  void Advance(std::int64_t ms) {
    for (std::int64_t i = 0; i < ms; ++i) {
      world_.RunFor(1);
      Step([] {});
    }
  }
  // Until `pred` holds (at most `max_ms`).
  bool AdvanceUntil(const std::function<bool()>& pred, std::int64_t max_ms) {
    for (std::int64_t i = 0; i < max_ms && !pred(); ++i) Advance(1);
    return pred();
  }

  void Quorum(bool has, std::uint64_t incarnation = 7) {
    Step([&] { host_->SetView(has, kLeaderAddr, incarnation); });
  }

  std::uint64_t Send(Command c) {
    c.request_id = next_request_++;
    sent_[c.request_id] = c.op == Command::Op::kSpawn ? "spawn " + c.label : "stop " + c.label;
    Step([&] { host_->OnCommand(kLeaderAddr, c); });
    return c.request_id;
  }
  std::uint64_t Spawn(const std::string& label, Generation g, const std::string& type = "worker",
                      SpecKind kind = SpecKind::kActor) {
    Command c;
    c.op = Command::Op::kSpawn;
    c.label = label;
    c.generation = g;
    c.kind = kind;
    c.actor_type = type;
    c.state = "state-of-" + label;
    c.drain_ms = 100;
    return Send(c);
  }
  std::uint64_t Stop(const std::string& label, Generation g, const std::string& reason = "") {
    Command c;
    c.op = Command::Op::kStop;
    c.label = label;
    c.generation = g;
    c.reason = reason;
    return Send(c);
  }
  void Started(const std::string& label, Generation g, Status s = Status::Ok()) {
    Step([&] { host_->Started(label, g, s); });
  }
  void Stopped(const std::string& label, Generation g) {
    Step([&] { host_->Stopped(label, g); });
  }

  // The acks for one request (delivered so far).
  std::vector<cw::Ack> AcksFor(std::uint64_t request_id) const {
    std::vector<cw::Ack> out;
    for (const auto& a : acks_) {
      if (a.request_id == request_id) out.push_back(a);
    }
    return out;
  }
  // The single ack of a request, after letting it arrive.
  cw::Ack OneAck(std::uint64_t request_id) {
    Advance(6);
    auto acks = AcksFor(request_id);
    EXPECT_EQ(acks.size(), 1u) << "request " << request_id;
    return acks.empty() ? cw::Ack{} : acks.front();
  }
  std::optional<InstancePhase> Phase(const std::string& label) const {
    for (const auto& i : host_->Instances()) {
      if (i.label == label) return i.phase;
    }
    return std::nullopt;
  }
  // Spawn `label` and bring it to active; returns the spawn's request id.
  std::uint64_t RunActive(const std::string& label, Generation g) {
    const std::size_t before = starts_.size();
    const auto rid = Spawn(label, g);
    EXPECT_TRUE(AdvanceUntil([&] { return starts_.size() > before; }, 2 * kLeaseMs));
    Started(label, g);
    EXPECT_EQ(host_->ActiveGeneration(label), g);
    return rid;
  }
  // Gated from now on: quorum seen and stabilized.
  void Gate() {
    Quorum(true);
    Advance(kStabilize);
    ASSERT_TRUE(host_->Gated());
  }
  bool HasRecord(const std::string& event, const std::string& label) const {
    for (const auto& r : records_) {
      if (r.event == event && r.label == label) return true;
    }
    return false;
  }

  int CountRecords(const std::string& event, const std::string& label) const {
    int n = 0;
    for (const auto& r : records_) n += r.event == event && r.label == label;
    return n;
  }

  std::int64_t stop_lead_ms_;
  bool guarded_;
  sim::SimWorld world_{23};
  std::unique_ptr<GuardEnv> guard_;
  Env* env_ = nullptr;
  std::unique_ptr<OwnerLeases> leases_;
  std::unique_ptr<Host> host_;
  std::vector<StartCall> starts_;
  std::vector<StopCall> stops_;
  std::vector<std::pair<std::string, Generation>> regrants_;
  std::vector<InstanceRecord> records_;
  std::vector<cw::Ack> acks_;
  std::vector<cw::Report> reports_;
  std::map<std::uint64_t, std::string> sent_;
  std::uint64_t next_request_ = 100;
};

TEST_F(HostTest, SpawnStartsOnceLeasedAndGated) {
  Gate();
  const Generation g{3, 1};
  const std::int64_t spawned_at = Now();
  const auto rid = Spawn("a1", g);
  EXPECT_EQ(Phase("a1"), InstancePhase::kAcquiring);
  EXPECT_TRUE(starts_.empty());  // no lease yet
  EXPECT_TRUE(leases_->Wanted("a1"));
  EXPECT_EQ(host_->KnownGeneration("a1"), g);

  Advance(2);
  ASSERT_EQ(starts_.size(), 1u);
  EXPECT_LE(starts_[0].at, spawned_at + 1);
  const InstanceContext& ctx = starts_[0].ctx;
  EXPECT_EQ(ctx.node, kSelf);
  EXPECT_EQ(ctx.label, "a1");
  EXPECT_EQ(ctx.kind, SpecKind::kActor);
  EXPECT_EQ(ctx.actor_type, "worker");
  EXPECT_EQ(ctx.state, "state-of-a1");
  EXPECT_EQ(ctx.generation, g);
  EXPECT_EQ(Phase("a1"), InstancePhase::kStarting);
  EXPECT_TRUE(HasRecord("instance_start", "a1"));
  Advance(10);
  EXPECT_TRUE(AcksFor(rid).empty());  // not before the factory answered
  EXPECT_FALSE(host_->ActiveGeneration("a1").has_value());

  Started("a1", g);
  EXPECT_EQ(Phase("a1"), InstancePhase::kActive);
  EXPECT_EQ(host_->ActiveGeneration("a1"), g);
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kOk) << ack.message;
  EXPECT_EQ(ack.op, Command::Op::kSpawn);
  EXPECT_EQ(ack.label, "a1");
  EXPECT_EQ(ack.generation, g);
  EXPECT_EQ(ack.incarnation, 7u);
  EXPECT_EQ(ack.report_seq, host_->report_seq());

  // It keeps running while the lease renews.
  Advance(3 * kLeaseMs);
  EXPECT_EQ(host_->ActiveGeneration("a1"), g);
  EXPECT_TRUE(stops_.empty());
  EXPECT_EQ(starts_.size(), 1u);
}

TEST_F(HostTest, ActivationGateWaitsStabilizeAfterQuorumAppears) {
  Quorum(true);
  const std::int64_t quorum_at = Now();
  EXPECT_FALSE(host_->Gated());
  Spawn("a1", {1, 0});
  Advance(kStabilize - 1);
  EXPECT_TRUE(starts_.empty());
  EXPECT_FALSE(host_->Gated());
  EXPECT_GT(leases_->Until("a1"), Now());  // leased all along; only the gate holds it
  Advance(1);
  ASSERT_EQ(starts_.size(), 1u);
  EXPECT_EQ(starts_[0].at, quorum_at + kStabilize);
  Started("a1", {1, 0});

  // Quorum lost and regained: the window starts again.
  Quorum(false);
  ASSERT_EQ(stops_.size(), 1u);
  Stopped("a1", {1, 0});
  Quorum(true);
  const std::int64_t again_at = Now();
  Spawn("a2", {1, 0});
  Advance(kStabilize - 1);
  EXPECT_EQ(starts_.size(), 1u);
  Advance(1);
  ASSERT_EQ(starts_.size(), 2u);
  EXPECT_EQ(starts_[1].at, again_at + kStabilize);
  Started("a2", {1, 0});
}

TEST_F(HostTest, DuplicateSpawnSameGenerationAcksWithoutASecondStart) {
  Gate();
  const Generation g{2, 0};
  // Twice while acquiring/starting: both answered when it started.
  const auto r1 = Spawn("a1", g);
  const auto r2 = Spawn("a1", g);
  ASSERT_TRUE(AdvanceUntil([&] { return !starts_.empty(); }, kLeaseMs));
  const auto r3 = Spawn("a1", g);  // while starting
  Started("a1", g);
  EXPECT_EQ(OneAck(r1).code, ErrorCode::kOk);
  EXPECT_EQ(OneAck(r2).code, ErrorCode::kOk);
  EXPECT_EQ(OneAck(r3).code, ErrorCode::kOk);
  // Once more while active.
  const auto r4 = Spawn("a1", g);
  EXPECT_EQ(OneAck(r4).code, ErrorCode::kOk);
  Advance(100);
  EXPECT_EQ(starts_.size(), 1u);
  EXPECT_TRUE(regrants_.empty());
}

TEST_F(HostTest, LowerGenerationSpawnIsStale) {
  Gate();
  RunActive("a1", {2, 0});
  const auto rid = Spawn("a1", {1, 9});
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kStaleGeneration);
  EXPECT_NE(ack.message.find("older"), std::string::npos) << ack.message;
  EXPECT_EQ(ack.generation, (Generation{1, 9}));
  EXPECT_EQ(starts_.size(), 1u);
  EXPECT_EQ(host_->ActiveGeneration("a1"), (Generation{2, 0}));

  // Also for a label that is not running but whose generation is known.
  const auto stop = Stop("b1", {5, 0});
  EXPECT_EQ(OneAck(stop).code, ErrorCode::kOk);
  const auto spawn = Spawn("b1", {4, 0});
  EXPECT_EQ(OneAck(spawn).code, ErrorCode::kStaleGeneration);
  Advance(100);
  EXPECT_EQ(starts_.size(), 1u);
}

TEST_F(HostTest, RegrantOnActiveInstance) {
  Gate();
  RunActive("a1", {2, 0});
  const auto rid = Spawn("a1", {2, 1});
  ASSERT_EQ(regrants_.size(), 1u);
  EXPECT_EQ(regrants_[0].first, "a1");
  EXPECT_EQ(regrants_[0].second, (Generation{2, 1}));
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kOk);
  EXPECT_EQ(ack.generation, (Generation{2, 1}));
  EXPECT_EQ(host_->ActiveGeneration("a1"), (Generation{2, 1}));
  EXPECT_EQ(starts_.size(), 1u);
  EXPECT_TRUE(HasRecord("instance_regrant", "a1"));
  // The lease follows the new generation and keeps it running.
  Advance(3 * kLeaseMs);
  EXPECT_EQ(host_->ActiveGeneration("a1"), (Generation{2, 1}));
  EXPECT_TRUE(stops_.empty());
}

TEST_F(HostTest, RegrantWhileStartingSupersedesTheOlderSpawn) {
  Gate();
  const auto r1 = Spawn("a1", {2, 0});
  ASSERT_TRUE(AdvanceUntil([&] { return !starts_.empty(); }, kLeaseMs));
  const auto r2 = Spawn("a1", {2, 1});
  const auto old = OneAck(r1);
  EXPECT_EQ(old.code, ErrorCode::kStaleGeneration);
  EXPECT_NE(old.message.find("superseded"), std::string::npos) << old.message;
  Started("a1", {2, 0});  // the factory ran with the older generation
  EXPECT_EQ(OneAck(r2).code, ErrorCode::kOk);
  ASSERT_EQ(regrants_.size(), 1u);
  EXPECT_EQ(regrants_[0].second, (Generation{2, 1}));
  EXPECT_EQ(host_->ActiveGeneration("a1"), (Generation{2, 1}));
}

TEST_F(HostTest, StopWithLowerGenerationIsRefused) {
  Gate();
  RunActive("a1", {2, 0});
  const auto rid = Stop("a1", {1, 0});
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kStaleGeneration);
  EXPECT_EQ(ack.op, Command::Op::kStop);
  EXPECT_TRUE(stops_.empty());
  EXPECT_EQ(host_->ActiveGeneration("a1"), (Generation{2, 0}));

  // The right generation stops it; the ack waits for Stopped.
  const auto rid2 = Stop("a1", {2, 0}, "stopped by the coordinator: removed");
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_EQ(stops_[0].reason, "stopped by the coordinator: removed");
  EXPECT_EQ(stops_[0].generation, (Generation{2, 0}));
  EXPECT_EQ(Phase("a1"), InstancePhase::kStopping);
  Advance(10);
  EXPECT_TRUE(AcksFor(rid2).empty());
  Stopped("a1", {2, 0});
  EXPECT_EQ(OneAck(rid2).code, ErrorCode::kOk);
  EXPECT_TRUE(host_->Idle());
  EXPECT_FALSE(leases_->Wanted("a1"));
  EXPECT_TRUE(HasRecord("instance_stop", "a1"));
}

TEST_F(HostTest, StopOfUnknownLabelAcksOk) {
  Gate();
  const auto rid = Stop("nothing", {1, 0});
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kOk);
  EXPECT_EQ(ack.op, Command::Op::kStop);
  EXPECT_EQ(ack.label, "nothing");
  EXPECT_TRUE(stops_.empty());
}

TEST_F(HostTest, StopWhileAcquiringCancels) {
  Quorum(true);  // not stabilized yet: the spawn waits
  const auto spawn = Spawn("a1", {1, 0});
  Advance(10);
  EXPECT_EQ(Phase("a1"), InstancePhase::kAcquiring);
  const auto stop = Stop("a1", {1, 0});
  const auto sack = OneAck(spawn);
  EXPECT_EQ(sack.code, ErrorCode::kUnavailable);
  EXPECT_NE(sack.message.find("cancelled"), std::string::npos) << sack.message;
  EXPECT_EQ(OneAck(stop).code, ErrorCode::kOk);
  EXPECT_TRUE(host_->Idle());
  EXPECT_FALSE(leases_->Wanted("a1"));
  Advance(kStabilize + 100);
  EXPECT_TRUE(starts_.empty());
  EXPECT_TRUE(stops_.empty());  // never started, so never stopped
}

TEST_F(HostTest, StopWhileStartingStopsRightAfterItStarted) {
  Gate();
  const auto spawn = Spawn("a1", {1, 0});
  ASSERT_TRUE(AdvanceUntil([&] { return !starts_.empty(); }, kLeaseMs));
  const auto stop = Stop("a1", {1, 0}, "moving to elsewhere");
  EXPECT_TRUE(stops_.empty());  // the factory is still running
  Started("a1", {1, 0});
  const auto sack = OneAck(spawn);
  EXPECT_EQ(sack.code, ErrorCode::kUnavailable);
  EXPECT_NE(sack.message.find("moving to elsewhere"), std::string::npos) << sack.message;
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_EQ(stops_[0].reason, "moving to elsewhere");
  Stopped("a1", {1, 0});
  EXPECT_EQ(OneAck(stop).code, ErrorCode::kOk);
  EXPECT_TRUE(host_->Idle());
}

TEST_F(HostTest, FactoryFailureAcksTheErrorAndFencesTheGeneration) {
  Gate();
  const auto rid = Spawn("a1", {1, 0});
  ASSERT_TRUE(AdvanceUntil([&] { return !starts_.empty(); }, kLeaseMs));
  // An answer for another generation is ignored.
  Started("a1", {0, 9}, Status::BackendFailure("not me"));
  EXPECT_EQ(Phase("a1"), InstancePhase::kStarting);
  Started("a1", {1, 0}, Status::BackendFailure("boom"));
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kBackendFailure);
  EXPECT_EQ(ack.message, "boom");
  EXPECT_TRUE(host_->Idle());
  EXPECT_FALSE(leases_->Wanted("a1"));
  EXPECT_TRUE(HasRecord("instance_failed", "a1"));
  EXPECT_TRUE(stops_.empty());

  // The same generation never runs here again.
  const auto again = Spawn("a1", {1, 0});
  const auto aack = OneAck(again);
  EXPECT_EQ(aack.code, ErrorCode::kStaleGeneration);
  EXPECT_NE(aack.message.find("already ran"), std::string::npos) << aack.message;
  Advance(100);
  EXPECT_EQ(starts_.size(), 1u);

  // A higher one does.
  const auto higher = Spawn("a1", {1, 1});
  ASSERT_TRUE(AdvanceUntil([&] { return starts_.size() == 2; }, kLeaseMs));
  EXPECT_EQ(starts_[1].ctx.generation, (Generation{1, 1}));
  Started("a1", {1, 1});
  EXPECT_EQ(OneAck(higher).code, ErrorCode::kOk);
}

TEST_F(HostTest, StoppedGenerationIsNotRespawned) {
  Gate();
  RunActive("a1", {1, 0});
  const auto stop = Stop("a1", {1, 0});
  Stopped("a1", {1, 0});
  EXPECT_EQ(OneAck(stop).code, ErrorCode::kOk);
  const auto again = Spawn("a1", {1, 0});
  EXPECT_EQ(OneAck(again).code, ErrorCode::kStaleGeneration);
  EXPECT_EQ(starts_.size(), 1u);
}

TEST_F(HostTest, AStorageFloorDropsTheInstanceRefusesLowerSpawnsAndIsReported) {
  Gate();
  RunActive("a1", {1, 0});
  // The runtime found the journal fenced at {2, 0}: the instance cannot run.
  Step([&] { host_->RaiseFloor("a1", {2, 0}); });
  EXPECT_TRUE(host_->Idle());
  EXPECT_FALSE(leases_->Wanted("a1"));
  EXPECT_TRUE(HasRecord("instance_failed", "a1"));
  world_.RunFor(10);
  ASSERT_FALSE(reports_.empty());
  ASSERT_EQ(reports_.back().floors.size(), 1u);
  EXPECT_EQ(reports_.back().floors[0].label, "a1");
  EXPECT_EQ(reports_.back().floors[0].generation, (Generation{2, 0}));
  // A spawn below the floor is refused; a lower floor changes nothing.
  const auto low = Spawn("a1", {1, 1});
  EXPECT_EQ(OneAck(low).code, ErrorCode::kStaleGeneration);
  Step([&] { host_->RaiseFloor("a1", {1, 5}); });
  // A term above it starts, and the floor (which served its purpose) is no
  // longer reported.
  const auto above = Spawn("a1", {3, 0});
  ASSERT_TRUE(AdvanceUntil([&] { return starts_.size() == 2; }, kLeaseMs));
  EXPECT_EQ(starts_[1].ctx.generation, (Generation{3, 0}));
  Started("a1", {3, 0});
  EXPECT_EQ(OneAck(above).code, ErrorCode::kOk);
  world_.RunFor(10);
  EXPECT_TRUE(reports_.back().floors.empty());
  // A floor at or below a running instance's generation leaves it running.
  Step([&] { host_->RaiseFloor("a1", {3, 0}); });
  EXPECT_EQ(Phase("a1"), InstancePhase::kActive);
}

TEST_F(HostTest, AStorageFloorGoesOutInAFewReportsThenIsDropped) {
  Gate();
  const std::size_t before = reports_.size();
  Step([&] { host_->RaiseFloor("a9", {4, 0}); });
  Advance(2'000 * 8);  // several report intervals
  int with_floor = 0;
  for (std::size_t i = before; i < reports_.size(); ++i) {
    for (const auto& f : reports_[i].floors) with_floor += f.label == "a9" ? 1 : 0;
  }
  EXPECT_EQ(with_floor, 5);
  ASSERT_GT(reports_.size(), before + 5);
  EXPECT_TRUE(reports_.back().floors.empty());
  // Spawns below it are still refused (the node keeps knowing the generation).
  EXPECT_EQ(OneAck(Spawn("a9", {3, 9})).code, ErrorCode::kStaleGeneration);
}

TEST_F(HostTest, UnknownActorTypeIsNotFound) {
  Gate();
  const auto rid = Spawn("a1", {1, 0}, "gpu-model");
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kNotFound);
  EXPECT_NE(ack.message.find("gpu-model"), std::string::npos) << ack.message;
  EXPECT_TRUE(host_->Idle());
  // An agent of a family the node does not offer, likewise.
  const auto agent = Spawn("queue://x", {1, 0}, "queue", SpecKind::kAgent);
  EXPECT_EQ(OneAck(agent).code, ErrorCode::kNotFound);
  Advance(100);
  EXPECT_TRUE(starts_.empty());
}

TEST_F(HostTest, AgentsOfAnOfferedFamilyStart) {
  AgentFamily f;
  f.scheme = "queue";
  f.agents = {"queue://x", "queue://y"};
  f.supported = std::vector<std::string>{"queue://x"};
  Step([&] { host_->SetFamilies({f}); });
  Gate();
  const auto ok = Spawn("queue://x", {1, 0}, "queue", SpecKind::kAgent);
  const auto unsupported = Spawn("queue://y", {1, 0}, "queue", SpecKind::kAgent);
  EXPECT_EQ(OneAck(unsupported).code, ErrorCode::kNotFound);
  ASSERT_TRUE(AdvanceUntil([&] { return !starts_.empty(); }, kLeaseMs));
  EXPECT_EQ(starts_[0].ctx.kind, SpecKind::kAgent);
  EXPECT_EQ(starts_[0].ctx.actor_type, "queue");
  Started("queue://x", {1, 0});
  EXPECT_EQ(OneAck(ok).code, ErrorCode::kOk);
}

TEST_F(HostTest, NoQuorumIsUnavailable) {
  const auto rid = Spawn("a1", {1, 0});  // the view never said quorum
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kUnavailable);
  EXPECT_NE(ack.message.find("quorum"), std::string::npos) << ack.message;
  EXPECT_TRUE(host_->Idle());
  Advance(kStabilize + 100);
  EXPECT_TRUE(starts_.empty());
}

TEST_F(HostTest, LosingQuorumStopsEverything) {
  Gate();
  RunActive("a1", {1, 0});
  RunActive("a2", {1, 0});
  Quorum(false);
  ASSERT_EQ(stops_.size(), 2u);
  for (const auto& s : stops_) EXPECT_EQ(s.reason, "lost quorum") << s.label;
  EXPECT_FALSE(host_->Gated());
  Stopped("a1", {1, 0});
  Stopped("a2", {1, 0});
  EXPECT_TRUE(host_->Idle());

  // An acquiring one is cancelled.
  Quorum(true);
  const auto rid = Spawn("a3", {1, 0});
  Quorum(false);
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kUnavailable);
  EXPECT_NE(ack.message.find("cancelled: lost quorum"), std::string::npos) << ack.message;
  EXPECT_TRUE(host_->Idle());
}

TEST_F(HostTest, ShutdownStopsEverythingAndRefusesSpawns) {
  Gate();
  RunActive("a1", {1, 0});
  const auto acquiring = Spawn("a2", {1, 0}, "storage");
  // a2 is still acquiring: its first lease round has not run yet.
  EXPECT_EQ(Phase("a2"), InstancePhase::kAcquiring);
  Step([&] { host_->Shutdown(); });
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_EQ(stops_[0].label, "a1");
  EXPECT_EQ(stops_[0].reason, "shutdown");
  const auto ack = OneAck(acquiring);
  EXPECT_EQ(ack.code, ErrorCode::kUnavailable);
  EXPECT_NE(ack.message.find("cancelled: shutdown"), std::string::npos) << ack.message;
  EXPECT_FALSE(host_->Gated());
  Stopped("a1", {1, 0});
  EXPECT_TRUE(host_->Idle());

  const auto later = Spawn("a3", {1, 0});
  const auto lack = OneAck(later);
  EXPECT_EQ(lack.code, ErrorCode::kUnavailable);
  EXPECT_NE(lack.message.find("shutting down"), std::string::npos) << lack.message;
  Advance(kLeaseMs);
  EXPECT_EQ(starts_.size(), 1u);
  // A shut-down node offers nothing in its report.
  ASSERT_FALSE(reports_.empty());
  EXPECT_TRUE(reports_.back().actor_types.empty());
  EXPECT_TRUE(reports_.back().instances.empty());
}

TEST_F(HostTest, InstanceStopsWhenItsLeaseIsNotRenewed) {
  Gate();
  RunActive("a1", {1, 0});
  // Quorum 2 with no peer: the lease is never renewed again.
  leases_->SetView({Member{kSelf, kSelfAddr}}, 2);
  const std::int64_t until = leases_->Until("a1");
  ASSERT_GT(until, Now());
  ASSERT_TRUE(AdvanceUntil([&] { return !stops_.empty(); }, 2 * kLeaseMs));
  EXPECT_EQ(stops_[0].reason, "lease expired");
  EXPECT_EQ(stops_[0].at, until - stop_lead_ms_);
  EXPECT_TRUE(HasRecord("instance_lease_expired", "a1"));
  EXPECT_FALSE(leases_->Wanted("a1"));  // never renewed again under this instance
  Stopped("a1", {1, 0});
  EXPECT_TRUE(host_->Idle());
}

TEST_F(HostTest, ReportsReachTheLeaderOnChange) {
  Gate();
  Advance(10);
  ASSERT_FALSE(reports_.empty());
  EXPECT_TRUE(reports_.back().has_quorum);
  EXPECT_EQ(reports_.back().actor_types, (std::vector<std::string>{"storage", "worker"}));
  const std::uint64_t seq = reports_.back().seq;
  RunActive("a1", {1, 0});
  Advance(10);
  const auto& r = reports_.back();
  EXPECT_GT(r.seq, seq);
  EXPECT_EQ(r.incarnation, 7u);
  ASSERT_EQ(r.instances.size(), 1u);
  EXPECT_EQ(r.instances[0].label, "a1");
  EXPECT_EQ(r.instances[0].phase, InstancePhase::kActive);
  EXPECT_EQ(r.instances[0].generation, (Generation{1, 0}));
}

// A factory still running when the lease runs out: the instance is stopped
// right after it started, and the expiry is found (and recorded) once.
TEST_F(HostTest, LeaseExpiringWhileStartingIsHandledOnce) {
  Gate();
  const auto rid = Spawn("a1", {1, 0});
  ASSERT_TRUE(AdvanceUntil([&] { return !starts_.empty(); }, kLeaseMs));
  leases_->SetView({Member{kSelf, kSelfAddr}}, 2);  // no more renewals
  Advance(2 * kLeaseMs);
  EXPECT_TRUE(stops_.empty());  // the factory has not answered yet
  EXPECT_EQ(CountRecords("instance_lease_expired", "a1"), 1);
  Started("a1", {1, 0});
  const auto ack = OneAck(rid);
  EXPECT_EQ(ack.code, ErrorCode::kUnavailable);
  EXPECT_NE(ack.message.find("lease expired"), std::string::npos) << ack.message;
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_EQ(stops_[0].reason, "lease expired");
  Stopped("a1", {1, 0});
  EXPECT_TRUE(host_->Idle());
}

class HostStopLeadTest : public HostTest {
 protected:
  HostStopLeadTest() : HostTest(/*stop_lead_ms=*/200) {}
};

TEST_F(HostStopLeadTest, InstanceStopsStopLeadBeforeExpiry) {
  Gate();
  RunActive("a1", {1, 0});
  Advance(2 * kLeaseMs);  // renewals keep it well ahead of the stop lead
  EXPECT_TRUE(stops_.empty());
  leases_->SetView({Member{kSelf, kSelfAddr}}, 2);
  const std::int64_t until = leases_->Until("a1");
  ASSERT_TRUE(AdvanceUntil([&] { return !stops_.empty(); }, 2 * kLeaseMs));
  EXPECT_EQ(stops_[0].reason, "lease expired");
  EXPECT_EQ(stops_[0].at, until - 200);
  Stopped("a1", {1, 0});
}

}  // namespace
}  // namespace pynenc_cpp::cluster

namespace pynenc_cpp::cluster {
namespace {

// Timers guarded as NodeCore guards them, with the stop lead NodeCore uses
// (heartbeat / 2).
class HostGuardedTest : public HostTest {
 protected:
  HostGuardedTest() : HostTest(/*stop_lead_ms=*/kHeartbeat / 2, /*guarded=*/true) {}
};

TEST_F(HostGuardedTest, LeaseExpiringWhileStartingDoesNotSpin) {
  Gate();
  const auto rid = Spawn("a1", {1, 0});
  ASSERT_TRUE(AdvanceUntil([&] { return !starts_.empty(); }, kLeaseMs));
  leases_->SetView({Member{kSelf, kSelfAddr}}, 2);  // no more renewals
  const std::int64_t events_before = guard_->events;
  // Only timer events from now on, each guarded like NodeCore's.
  world_.RunFor(2 * kLeaseMs);
  // Heartbeats (every 100 ms) and a report or two: a few dozen events, not a
  // timer re-armed at 0 ms forever while the factory runs.
  EXPECT_FALSE(guard_->overflow);
  EXPECT_LT(guard_->events - events_before, 200);
  EXPECT_EQ(CountRecords("instance_lease_expired", "a1"), 1);
  EXPECT_TRUE(stops_.empty());
  Started("a1", {1, 0});
  EXPECT_EQ(OneAck(rid).code, ErrorCode::kUnavailable);
  ASSERT_EQ(stops_.size(), 1u);
  EXPECT_EQ(stops_[0].reason, "lease expired");
  Stopped("a1", {1, 0});
  EXPECT_TRUE(host_->Idle());
}

TEST_F(HostGuardedTest, HealthyInstanceArmsFewTimers) {
  // The control: the same run with the lease renewed.
  Gate();
  RunActive("a1", {1, 0});
  const std::int64_t events_before = guard_->events;
  world_.RunFor(2 * kLeaseMs);
  EXPECT_FALSE(guard_->overflow);
  EXPECT_LT(guard_->events - events_before, 200);
  EXPECT_EQ(host_->ActiveGeneration("a1"), (Generation{1, 0}));
}

}  // namespace
}  // namespace pynenc_cpp::cluster
