#include "cluster/transport/backoff.h"

#include <gtest/gtest.h>

#include <random>

namespace pynenc_cpp::cluster::transport {
namespace {

TEST(TransportBackoff, DoublesFromInitialToMaxWithJitterInTheUpperHalf) {
  std::mt19937_64 rng(3);
  const std::int64_t expected_d[] = {200, 400, 800, 1600, 3200, 6400, 10000, 10000};
  for (int f = 1; f <= 8; ++f) {
    const std::int64_t d = expected_d[f - 1];
    std::int64_t lo = d, hi = 0;
    for (int i = 0; i < 2000; ++i) {
      const auto w = BackoffDelayMs(200, 10'000, f, rng());
      lo = std::min(lo, w);
      hi = std::max(hi, w);
    }
    EXPECT_GE(lo, d / 2) << "failures=" << f;
    EXPECT_LE(hi, d) << "failures=" << f;
    EXPECT_LT(lo, d / 2 + d / 10) << "jitter reaches near the bottom";
    EXPECT_GT(hi, d - d / 10) << "jitter reaches near the top";
  }
}

TEST(TransportBackoff, ExtremesNeverOverflow) {
  EXPECT_EQ(BackoffDelayMs(1, 1, 1, 0), 0);  // d = 1: [0, 1]
  EXPECT_EQ(BackoffDelayMs(1, 1, 1, 1), 1);
  const std::int64_t big = std::int64_t{1} << 62;
  EXPECT_LE(BackoffDelayMs(big, big, 1'000'000, ~0ull), big);
  EXPECT_GE(BackoffDelayMs(3, big, 1'000'000, 0), big / 2);
  EXPECT_EQ(BackoffDelayMs(200, 10'000, 1, 0), 100);
  EXPECT_EQ(BackoffDelayMs(200, 10'000, 1, 100), 200);
}

}  // namespace
}  // namespace pynenc_cpp::cluster::transport
