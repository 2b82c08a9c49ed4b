// The status machine against a hand-written table of pynenc 0.4.0's rules:
// every (from, to) pair for legality, and every (from, to, owner, runner) case
// for the ownership check and the resulting owner.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "pynenc_cpp/core/status.h"

namespace pynenc_cpp {
namespace {

using S = InvocationStatus;

// Written out independently of status.cc, from pynenc/invocation/status.py.
const std::map<std::optional<S>, std::set<S>>& ExpectedTransitions() {
  static const std::map<std::optional<S>, std::set<S>> table = {
      {std::nullopt, {S::kRegistered}},
      {S::kRegistered, {S::kPending, S::kConcurrencyControlled, S::kConcurrencyControlledFinal}},
      {S::kConcurrencyControlled, {S::kRerouted}},
      {S::kConcurrencyControlledFinal, {}},
      {S::kRerouted, {S::kPending, S::kConcurrencyControlled}},
      {S::kPending, {S::kRunning, S::kKilled, S::kRerouted, S::kPendingRecovery}},
      {S::kPendingRecovery, {S::kRerouted}},
      {S::kRunning,
       {S::kPaused, S::kKilled, S::kRetry, S::kSuccess, S::kFailed, S::kRunningRecovery}},
      {S::kRunningRecovery, {S::kRerouted}},
      {S::kPaused, {S::kRunning, S::kKilled}},
      {S::kKilled, {S::kRerouted}},
      {S::kSuccess, {}},
      {S::kFailed, {}},
      {S::kRetry, {S::kPending}},
  };
  return table;
}

const std::set<S> kRequires = {S::kPending, S::kRunning, S::kPaused};
const std::set<S> kAcquires = {S::kPending};
const std::set<S> kOverrides = {S::kPendingRecovery, S::kRunningRecovery};
const std::set<S> kReleases = {S::kRegistered,
                               S::kConcurrencyControlled,
                               S::kConcurrencyControlledFinal,
                               S::kRerouted,
                               S::kPendingRecovery,
                               S::kRunningRecovery,
                               S::kKilled,
                               S::kRetry,
                               S::kSuccess,
                               S::kFailed};
const std::set<S> kFinal = {S::kSuccess, S::kFailed, S::kConcurrencyControlledFinal};
const std::set<S> kAvailable = {S::kRegistered, S::kRerouted, S::kRetry};

TEST(StatusMachine, NamesRoundTrip) {
  EXPECT_EQ(AllStatuses().size(), 13u);
  for (S s : AllStatuses()) {
    auto parsed = ParseStatus(StatusName(s));
    ASSERT_TRUE(parsed.has_value()) << StatusName(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(StatusName(S::kConcurrencyControlledFinal), "concurrency_controlled_final");
  EXPECT_FALSE(ParseStatus("RUNNING").has_value());
  EXPECT_FALSE(ParseStatus("").has_value());
}

TEST(StatusMachine, FlagsMatchPynenc) {
  for (S s : AllStatuses()) {
    const StatusDefinition& d = Definition(s);
    SCOPED_TRACE(std::string(StatusName(s)));
    EXPECT_EQ(d.requires_ownership, kRequires.count(s) == 1);
    EXPECT_EQ(d.acquires_ownership, kAcquires.count(s) == 1);
    EXPECT_EQ(d.overrides_ownership, kOverrides.count(s) == 1);
    EXPECT_EQ(d.releases_ownership, kReleases.count(s) == 1);
    EXPECT_EQ(d.is_final, kFinal.count(s) == 1);
    EXPECT_EQ(d.available_for_run, kAvailable.count(s) == 1);
    EXPECT_FALSE(d.acquires_ownership && d.releases_ownership);
    EXPECT_FALSE(d.is_final && d.allowed_mask != 0);
  }
}

TEST(StatusMachine, EveryFromToPair) {
  std::vector<std::optional<S>> froms = {std::nullopt};
  for (S s : AllStatuses()) froms.push_back(s);
  int checked = 0;
  for (const auto& from : froms) {
    const auto& allowed = ExpectedTransitions().at(from);
    for (S to : AllStatuses()) {
      Status st = ValidateTransition(from, to);
      const bool legal = allowed.count(to) == 1;
      EXPECT_EQ(st.ok(), legal) << (from ? StatusName(*from) : "None") << " -> " << StatusName(to);
      if (!legal) {
        ASSERT_EQ(st.code(), ErrorCode::kIllegalTransition);
        ASSERT_TRUE(st.transition().has_value());
        EXPECT_EQ(st.transition()->from, from);
        EXPECT_EQ(st.transition()->to, to);
        EXPECT_EQ(std::set<S>(st.transition()->allowed.begin(), st.transition()->allowed.end()),
                  allowed);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 14 * 13);
}

// Ownership is checked on every legal transition with every combination of
// current owner {none, "r1"} and acting runner {none, "", "r1", "r2"}.
TEST(StatusMachine, EveryOwnershipCase) {
  const std::vector<std::optional<std::string>> owners = {std::nullopt, "r1"};
  const std::vector<std::optional<std::string>> actors = {std::nullopt, "", "r1", "r2"};
  int checked = 0;
  for (S from : AllStatuses()) {
    for (S to : ExpectedTransitions().at(from)) {
      for (const auto& owner : owners) {
        for (const auto& actor : actors) {
          StatusRecord current{from, owner, 100};
          Result<StatusRecord> r = ApplyTransition(current, to, actor, 200);
          // Expected, per pynenc's validate_ownership / compute_new_owner.
          bool violation = false;
          if (!kOverrides.count(to)) {
            if (kRequires.count(from) && actor != owner) {
              violation = true;
            } else if (kAcquires.count(to) && (!actor || actor->empty())) {
              violation = true;
            }
          }
          SCOPED_TRACE(std::string(StatusName(from)) + " -> " + std::string(StatusName(to)) +
                       " owner=" + owner.value_or("None") + " actor=" + actor.value_or("None"));
          ASSERT_EQ(r.ok(), !violation);
          if (violation) {
            EXPECT_EQ(r.status().code(), ErrorCode::kOwnershipViolation);
            EXPECT_EQ(r.status().transition()->current_owner, owner);
            continue;
          }
          std::optional<std::string> expected_owner = owner;
          if (kReleases.count(to)) {
            expected_owner.reset();
          } else if (kAcquires.count(to)) {
            expected_owner = actor;
          }
          EXPECT_EQ(r.value().status, to);
          EXPECT_EQ(r.value().runner_id, expected_owner);
          EXPECT_EQ(r.value().timestamp_us, 200);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(StatusMachine, FirstTransitionHasNoOwnershipCheck) {
  Result<StatusRecord> r = ApplyTransition(std::nullopt, S::kRegistered, std::nullopt, 5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().status, S::kRegistered);
  EXPECT_FALSE(r.value().runner_id.has_value());
  Result<StatusRecord> bad = ApplyTransition(std::nullopt, S::kRunning, std::string("r"), 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kIllegalTransition);
  EXPECT_FALSE(bad.status().transition()->from.has_value());
}

TEST(StatusMachine, ErrorMessagesNameTheProblem) {
  Status st = ValidateTransition(S::kSuccess, S::kRunning);
  EXPECT_NE(st.message().find("success"), std::string::npos);
  EXPECT_NE(st.message().find("running"), std::string::npos);
  Result<StatusRecord> r =
      ApplyTransition(StatusRecord{S::kRunning, "owner-a", 0}, S::kSuccess, std::string("b"), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("owner-a"), std::string::npos);
  EXPECT_NE(r.status().ToString().find("OwnershipViolation"), std::string::npos);
}

}  // namespace
}  // namespace pynenc_cpp
