// DroppedExecutions (ports/orchestrator.h): the rules every backend's
// PurgeAtomicServiceExecutions applies to its finished atomic-service rows.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp {
namespace {

std::vector<FinishedExecution> Rows() {
  // Oldest start first; run-2 has no end time.
  return {{"run-0", 10}, {"run-1", 20}, {"run-2", std::nullopt}, {"run-3", 40}, {"run-4", 50}};
}

TEST(DroppedExecutions, NoRuleDropsNothing) {
  EXPECT_EQ(DroppedExecutions(Rows(), {0, 0, {}}, 100), std::vector<bool>(5, false));
}

TEST(DroppedExecutions, RetentionDropsWhatEndedBeforeTheCutoffButNotAnOpenEnd) {
  // now 100, retention 65: cutoff 35.
  EXPECT_EQ(DroppedExecutions(Rows(), {65, 0, {}}, 100),
            (std::vector<bool>{true, true, false, false, false}));
}

TEST(DroppedExecutions, MaxRecordsDropsTheOldestBeyondTheCap) {
  EXPECT_EQ(DroppedExecutions(Rows(), {0, 2, {}}, 100),
            (std::vector<bool>{true, true, true, false, false}));
}

TEST(DroppedExecutions, AProtectedRunStaysAndStillCountsTowardTheCap) {
  EXPECT_EQ(DroppedExecutions(Rows(), {0, 2, {"run-0"}}, 100),
            (std::vector<bool>{false, true, true, true, false}));
  EXPECT_EQ(DroppedExecutions(Rows(), {65, 0, {"run-1"}}, 100),
            (std::vector<bool>{true, false, false, false, false}));
}

TEST(DroppedExecutions, TheCapCountsWhatRetentionLeft) {
  // Retention drops run-0 and run-1; of the 3 left, the cap of 2 drops run-2.
  EXPECT_EQ(DroppedExecutions(Rows(), {65, 2, {}}, 100),
            (std::vector<bool>{true, true, true, false, false}));
  // A cap above what is left drops nothing more.
  EXPECT_EQ(DroppedExecutions(Rows(), {65, 3, {}}, 100),
            (std::vector<bool>{true, true, false, false, false}));
}

}  // namespace
}  // namespace pynenc_cpp
