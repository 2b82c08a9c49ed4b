#include "pynenc_cpp/cluster/types.h"

#include <gtest/gtest.h>

namespace pynenc_cpp::cluster {
namespace {

TEST(ClusterTypes, NamesAreStable) {
  EXPECT_EQ(MemberStateName(MemberState::kAlive), "alive");
  EXPECT_EQ(MemberStateName(MemberState::kLeft), "left");
  EXPECT_EQ(MemberEventName(MemberEventKind::kAliveAgain), "alive_again");
  EXPECT_TRUE(IsLive(MemberState::kSuspect));
  EXPECT_FALSE(IsLive(MemberState::kDead));
}

}  // namespace
}  // namespace pynenc_cpp::cluster
