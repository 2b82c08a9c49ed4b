#include "pynenc_cpp/core/clock.h"

#include <chrono>

namespace pynenc_cpp {
namespace {

class RealClock final : public Clock {
 public:
  TimestampUs NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

std::shared_ptr<Clock> Clock::Real() {
  static const std::shared_ptr<Clock> clock = std::make_shared<RealClock>();
  return clock;
}

}  // namespace pynenc_cpp
