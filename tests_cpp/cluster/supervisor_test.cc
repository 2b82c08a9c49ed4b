// Table-driven tests of every Supervisor transition (docs/cluster/supervisor.md).
#include "pynenc_cpp/cluster/supervisor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pynenc_cpp::cluster {
namespace {

namespace ev = supervisor_event;
namespace fx = supervisor_effect;

constexpr std::int64_t kStabilize = 100;
constexpr std::uint64_t kEpoch = 7;

SupervisorInput At(std::int64_t t, decltype(SupervisorInput::event) e) { return {t, std::move(e)}; }
ev::ViewChanged Elected(std::uint64_t epoch = kEpoch) { return {true, true, epoch}; }
ev::ViewChanged NotElected() { return {false, true, kEpoch}; }
ev::ViewChanged NoQuorum() { return {false, false, kEpoch}; }
ev::ViewChanged ElectedNoQuorum() { return {true, false, kEpoch}; }

// Effects other than Log, rendered as short strings so tables compare them.
std::vector<std::string> Render(const std::vector<SupervisorEffect>& effects) {
  std::vector<std::string> out;
  for (const auto& e : effects) {
    if (auto* s = std::get_if<fx::StartWork>(&e)) {
      out.push_back("start(" + std::to_string(s->epoch) + "," + std::to_string(s->lease_until_ms) +
                    ")");
    } else if (auto* st = std::get_if<fx::StopWork>(&e)) {
      out.push_back("stop(" + st->reason + ")");
    } else if (auto* w = std::get_if<fx::WakeAt>(&e)) {
      out.push_back("wake(" + std::to_string(w->at_ms) + ")");
    }
  }
  return out;
}

// Builders: a supervisor brought into each state by legal inputs.
Supervisor InStandby() { return Supervisor({kStabilize}); }
Supervisor InActivating() {  // elected at t=0, no lease yet
  Supervisor s({kStabilize});
  (void)s.Step(At(0, Elected()));
  return s;
}
Supervisor InActivatingWithLease() {  // elected at t=0, lease until 1000, not yet stable
  Supervisor s = InActivating();
  (void)s.Step(At(10, ev::LeaseChanged{1000}));
  return s;
}
Supervisor InMaster() {  // master since t=100, lease until 1000
  Supervisor s = InActivatingWithLease();
  (void)s.Step(At(100, ev::Tick{}));
  return s;
}
Supervisor InStopping() {  // stopped because not elected at t=200
  Supervisor s = InMaster();
  (void)s.Step(At(200, NotElected()));
  return s;
}
Supervisor InShutdownStopping() {  // master shut down at t=200
  Supervisor s = InMaster();
  (void)s.Step(At(200, ev::Shutdown{}));
  return s;
}

struct Row {
  const char* name;
  Supervisor (*from)();
  SupervisorInput input;
  SupervisorState want_state;
  std::vector<std::string> want_effects;
};

class SupervisorTransitions : public ::testing::TestWithParam<Row> {};

TEST_P(SupervisorTransitions, Step) {
  const Row& row = GetParam();
  Supervisor s = row.from();
  auto effects = s.Step(row.input);
  EXPECT_EQ(s.state(), row.want_state) << SupervisorStateName(s.state());
  EXPECT_EQ(Render(effects), row.want_effects);
}

using S = SupervisorState;
using V = std::vector<std::string>;

const Row kRows[] = {
    // Standby
    {"StandbyTickStays", InStandby, At(5, ev::Tick{}), S::kStandby, V{}},
    {"StandbyNotElectedStays", InStandby, At(5, NotElected()), S::kStandby, V{}},
    {"StandbyElectedWithoutQuorumStays", InStandby, At(5, ElectedNoQuorum()), S::kStandby, V{}},
    {"StandbyElectedActivates", InStandby, At(5, Elected()), S::kActivating, V{"wake(105)"}},
    {"StandbyLeaseAloneStays", InStandby, At(5, ev::LeaseChanged{1000}), S::kStandby, V{}},
    {"StandbyShutdownIsTerminal", InStandby, At(5, ev::Shutdown{}), S::kStopping, V{}},
    {"StandbyWorkStoppedStays", InStandby, At(5, ev::WorkStopped{}), S::kStandby, V{}},
    // Activating
    {"ActivatingBeforeStableWaits", InActivating, At(50, ev::Tick{}), S::kActivating,
     V{"wake(100)"}},
    {"ActivatingStableWithoutLeaseWaits", InActivating, At(150, ev::Tick{}), S::kActivating, V{}},
    {"ActivatingStableLeaseArrivesStarts", InActivating, At(150, ev::LeaseChanged{900}), S::kMaster,
     V{"start(7,900)", "wake(900)"}},
    {"ActivatingStableExpiredLeaseWaits", InActivating, At(150, ev::LeaseChanged{150}),
     S::kActivating, V{}},
    {"ActivatingLeaseBeforeStableWaits", InActivating, At(20, ev::LeaseChanged{900}),
     S::kActivating, V{"wake(100)"}},
    {"ActivatingBecomesStableStarts", InActivatingWithLease, At(100, ev::Tick{}), S::kMaster,
     V{"start(7,1000)", "wake(1000)"}},
    {"ActivatingNotElectedStandsBy", InActivating, At(50, NotElected()), S::kStandby, V{}},
    {"ActivatingLostQuorumStandsBy", InActivatingWithLease, At(50, NoQuorum()), S::kStandby, V{}},
    {"ActivatingElectedWithoutQuorumStandsBy", InActivating, At(50, ElectedNoQuorum()), S::kStandby,
     V{}},
    {"ActivatingEpochChangeKeepsWindow", InActivatingWithLease, At(100, Elected(8)), S::kMaster,
     V{"start(8,1000)", "wake(1000)"}},
    {"ActivatingShutdownIsTerminal", InActivatingWithLease, At(50, ev::Shutdown{}), S::kStopping,
     V{}},
    // Master
    {"MasterTickKeepsWorking", InMaster, At(500, ev::Tick{}), S::kMaster, V{"wake(1000)"}},
    {"MasterRenewalMovesWake", InMaster, At(500, ev::LeaseChanged{1500}), S::kMaster,
     V{"wake(1500)"}},
    {"MasterLeaseExpiredStops", InMaster, At(1000, ev::Tick{}), S::kStopping,
     V{"stop(lease expired)"}},
    {"MasterLeaseExpiredWinsOverView", InMaster, At(1200, NotElected()), S::kStopping,
     V{"stop(lease expired)"}},
    {"MasterNotElectedStops", InMaster, At(500, NotElected()), S::kStopping,
     V{"stop(not elected)"}},
    {"MasterLostQuorumStops", InMaster, At(500, NoQuorum()), S::kStopping, V{"stop(lost quorum)"}},
    {"MasterElectedWithoutQuorumStops", InMaster, At(500, ElectedNoQuorum()), S::kStopping,
     V{"stop(lost quorum)"}},
    {"MasterEpochChangeKeepsWorking", InMaster, At(500, Elected(9)), S::kMaster, V{"wake(1000)"}},
    {"MasterWorkStartedKeepsWorking", InMaster, At(500, ev::WorkStarted{}), S::kMaster,
     V{"wake(1000)"}},
    {"MasterShutdownStops", InMaster, At(500, ev::Shutdown{}), S::kStopping, V{"stop(shutdown)"}},
    // Stopping
    {"StoppingTickWaits", InStopping, At(300, ev::Tick{}), S::kStopping, V{}},
    {"StoppingElectedAgainWaits", InStopping, At(300, Elected()), S::kStopping, V{}},
    {"StoppingWorkStoppedStandsBy", InStopping, At(300, ev::WorkStopped{}), S::kStandby, V{}},
    {"StoppingShutdownStaysStopping", InStopping, At(300, ev::Shutdown{}), S::kStopping, V{}},
    {"ShutdownStoppingWorkStoppedIsTerminal", InShutdownStopping, At(300, ev::WorkStopped{}),
     S::kStopping, V{}},
    {"ShutdownStoppingIgnoresElection", InShutdownStopping, At(300, Elected()), S::kStopping, V{}},
};

INSTANTIATE_TEST_SUITE_P(SupervisorTable, SupervisorTransitions, ::testing::ValuesIn(kRows),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Supervisor, StoppedWhileStillElectedRestabilizesBeforeRestarting) {
  Supervisor s = InMaster();
  // The lease runs out while still elected: stop, then re-activate after WorkStopped.
  EXPECT_EQ(Render(s.Step(At(1000, ev::Tick{}))), V{"stop(lease expired)"});
  EXPECT_TRUE(s.work_active());
  EXPECT_EQ(Render(s.Step(At(1010, ev::LeaseChanged{2000}))), V{});
  EXPECT_EQ(s.state(), S::kStopping);
  // WorkStopped: Standby -> Activating at once (still elected), a fresh window.
  EXPECT_EQ(Render(s.Step(At(1020, ev::WorkStopped{}))), V{"wake(1120)"});
  EXPECT_EQ(s.state(), S::kActivating);
  EXPECT_FALSE(s.work_active());
  EXPECT_EQ(Render(s.Step(At(1119, ev::Tick{}))), V{"wake(1120)"});
  EXPECT_EQ(Render(s.Step(At(1120, ev::Tick{}))), (V{"start(7,2000)", "wake(2000)"}));
}

TEST(Supervisor, FlappingElectionRestartsTheWindow) {
  Supervisor s = InActivatingWithLease();
  (void)s.Step(At(90, NotElected()));
  EXPECT_EQ(s.state(), S::kStandby);
  EXPECT_EQ(Render(s.Step(At(95, Elected()))), V{"wake(195)"});
  EXPECT_EQ(Render(s.Step(At(150, ev::Tick{}))), V{"wake(195)"});
  EXPECT_EQ(s.state(), S::kActivating);
  EXPECT_EQ(Render(s.Step(At(195, ev::Tick{}))), (V{"start(7,1000)", "wake(1000)"}));
}

TEST(Supervisor, ZeroStabilizeStartsOnTheElectingView) {
  Supervisor s({0});
  (void)s.Step(At(0, ev::LeaseChanged{500}));
  EXPECT_EQ(Render(s.Step(At(1, Elected()))), (V{"start(7,500)", "wake(500)"}));
  EXPECT_EQ(s.state(), S::kMaster);
}

TEST(Supervisor, TimeNeverGoesBackwards) {
  Supervisor s = InMaster();
  EXPECT_EQ(Render(s.Step(At(1000, ev::Tick{}))), V{"stop(lease expired)"});
  (void)s.Step(At(1001, ev::WorkStopped{}));
  (void)s.Step(At(1001, ev::LeaseChanged{3000}));
  // An input stamped earlier than one already seen is treated as "now = 1001".
  EXPECT_EQ(Render(s.Step(At(0, ev::Tick{}))), V{"wake(1101)"});
}

TEST(Supervisor, TransitionsAreLogged) {
  Supervisor s({kStabilize});
  auto effects = s.Step(At(0, Elected()));
  ASSERT_FALSE(effects.empty());
  auto* log = std::get_if<fx::Log>(&effects.front());
  ASSERT_NE(log, nullptr);
  EXPECT_NE(log->message.find("standby -> activating"), std::string::npos);
}

TEST(Supervisor, StateNamesAreStable) {
  EXPECT_EQ(SupervisorStateName(S::kStandby), "standby");
  EXPECT_EQ(SupervisorStateName(S::kActivating), "activating");
  EXPECT_EQ(SupervisorStateName(S::kMaster), "master");
  EXPECT_EQ(SupervisorStateName(S::kStopping), "stopping");
}

}  // namespace
}  // namespace pynenc_cpp::cluster
