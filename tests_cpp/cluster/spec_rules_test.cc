// The rules of actor and singleton specs (ValidateActorSpec and its parts): the
// messages name each field as pynenc_cpp.cluster's dataclasses do, times in
// seconds, since those classes raise exactly these.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/coordinator/spec_checks.h"
#include "pynenc_cpp/cluster/specs.h"

namespace pynenc_cpp::cluster {
namespace {

void ExpectMessage(const Status& s, const std::string& message) {
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), message);
}

ActorSpec Actor() {
  ActorSpec a;
  a.label = "a";
  a.actor_type = "t";
  return a;
}

SingletonSpec Singleton() {
  SingletonSpec s;
  s.label = "s";
  s.actor_type = "t";
  return s;
}

TEST(SpecRules, SecondsAreShownAsAUserWritesThem) {
  EXPECT_EQ(spec_checks::Seconds(0), "0");
  EXPECT_EQ(spec_checks::Seconds(2500), "2.5");
  EXPECT_EQ(spec_checks::Seconds(-1500), "-1.5");
  EXPECT_EQ(spec_checks::Seconds(1), "0.001");
  EXPECT_EQ(spec_checks::Seconds(86'400'000), "86400");
  EXPECT_EQ(spec_checks::Seconds(-5), "-0.005");
  EXPECT_EQ(spec_checks::Seconds(INT64_MIN), "-9223372036854775.808");
}

TEST(SpecRules, AcceptsWellFormedSpecs) {
  EXPECT_TRUE(ValidateActorSpec(Actor()).ok());
  ActorSpec a = Actor();
  a.crash_strategy = CrashStrategy::WaitForReturn(1);
  a.constraints.required_classes = {"worker"};
  a.constraints.required_metadata = {{"zone", ""}};
  a.constraints.colocate_with = "b";
  a.strategy.kind = StrategyChoice::Kind::kPinned;
  a.strategy.node = "n1";
  EXPECT_TRUE(ValidateActorSpec(a).ok());
  SingletonSpec s = Singleton();
  s.anchor = SingletonAnchor::Class("edge");
  s.drain_timeout_ms = kMaxDrainTimeoutMs;
  EXPECT_TRUE(ValidateSingletonSpec(s).ok());
}

TEST(SpecRules, NamesAndStateNameTheirField) {
  ActorSpec a = Actor();
  a.label = "";
  ExpectMessage(ValidateActorSpec(a), "label must be a non-empty str, got ''");
  a = Actor();
  a.actor_type = std::string(kMaxActorTypeBytes + 1, 'x');
  ExpectMessage(ValidateActorSpec(a), "actor_type must be at most 256 bytes, got 257");
  a = Actor();
  a.initial_state = std::string(kMaxStateBytes + 1, '\0');
  ExpectMessage(ValidateActorSpec(a), "initial_state must be at most 131072 bytes, got 131073");
  SingletonSpec s = Singleton();
  s.label = std::string(kMaxLabelBytes + 1, 'l');
  ExpectMessage(ValidateSingletonSpec(s), "label must be at most 1024 bytes, got 1025");
  s = Singleton();
  s.state = std::string(kMaxStateBytes + 1, '\0');
  ExpectMessage(ValidateSingletonSpec(s), "state must be at most 131072 bytes, got 131073");
}

TEST(SpecRules, CrashStrategyNeedsAPositiveWait) {
  ExpectMessage(ValidateCrashStrategy(CrashStrategy::WaitForReturn(0)),
                "wait_for_return needs wait_s > 0, got 0");
  ExpectMessage(ValidateCrashStrategy(CrashStrategy::WaitForReturn(-2500)),
                "wait_for_return needs wait_s > 0, got -2.5");
  EXPECT_TRUE(ValidateCrashStrategy(CrashStrategy::Abandon()).ok());
  ActorSpec a = Actor();
  a.crash_strategy = CrashStrategy::WaitForReturn(0);
  EXPECT_FALSE(ValidateActorSpec(a).ok());
}

TEST(SpecRules, ConstraintsRefuseEmptyNames) {
  PlacementConstraints c;
  c.required_classes = {"worker", ""};
  ExpectMessage(ValidatePlacementConstraints(c),
                "required_classes must contain non-empty str, got ''");
  c = {};
  c.anti_affinity_labels = {""};
  ExpectMessage(ValidatePlacementConstraints(c),
                "anti_affinity_labels must contain non-empty str, got ''");
  c = {};
  c.required_metadata = {{"", "eu"}};
  ExpectMessage(ValidatePlacementConstraints(c),
                "required_metadata must map non-empty str to str, got '': 'eu'");
  c = {};
  c.colocate_with = "";
  ExpectMessage(ValidatePlacementConstraints(c),
                "colocate_with must be None or a non-empty str, got ''");
  c = {};
  c.required_node_id = "";
  ExpectMessage(ValidatePlacementConstraints(c),
                "required_node_id must be None or a non-empty str, got ''");
  ActorSpec a = Actor();
  a.constraints.colocate_with = "";
  EXPECT_FALSE(ValidateActorSpec(a).ok());
}

TEST(SpecRules, ASpecMayNotNameItsOwnLabelOrPinNowhere) {
  ActorSpec a = Actor();
  a.constraints.colocate_with = "a";
  ExpectMessage(ValidateActorSpec(a), "constraints name the spec's own label 'a'");
  a = Actor();
  a.constraints.anti_affinity_labels = {"b", "a"};
  ExpectMessage(ValidateActorSpec(a), "constraints name the spec's own label 'a'");
  a = Actor();
  a.strategy.kind = StrategyChoice::Kind::kPinned;
  ExpectMessage(ValidateActorSpec(a), "a Pinned strategy needs a non-empty node_id");
}

TEST(SpecRules, AnchorsAndDrainTimeouts) {
  ExpectMessage(ValidateSingletonAnchor(SingletonAnchor::Class("")),
                "a class anchor needs a non-empty value");
  ExpectMessage(ValidateSingletonAnchor(SingletonAnchor::Node("")),
                "a node anchor needs a non-empty value");
  EXPECT_TRUE(ValidateSingletonAnchor(SingletonAnchor::Leader()).ok());
  SingletonSpec s = Singleton();
  s.drain_timeout_ms = 0;
  ExpectMessage(ValidateSingletonSpec(s),
                "drain_timeout_s must be > 0 and <= 86400 (a day), got 0");
  s.drain_timeout_ms = kMaxDrainTimeoutMs + 1000;
  ExpectMessage(ValidateSingletonSpec(s),
                "drain_timeout_s must be > 0 and <= 86400 (a day), got 86401");
}

}  // namespace
}  // namespace pynenc_cpp::cluster
