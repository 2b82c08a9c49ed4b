// Time source for the engine. Backends take time only from a Clock so that tests
// can drive heartbeats, timeouts and purges with a fake one.
//
// Thread safety: implementations must be safe to call from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace pynenc_cpp {

// Microseconds since the Unix epoch, UTC. pynenc's datetimes convert 1:1.
using TimestampUs = std::int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time (UTC), used for every timestamp the engine stores.
  virtual TimestampUs NowMicros() const = 0;

  // The process-wide real clock (std::chrono::system_clock). Never null.
  static std::shared_ptr<Clock> Real();
};

// A clock that only moves when told to. For tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimestampUs start) : now_(start) {}
  TimestampUs NowMicros() const override { return now_.load(); }
  void Advance(TimestampUs delta_us) { now_.fetch_add(delta_us); }
  void Set(TimestampUs now_us) { now_.store(now_us); }

 private:
  std::atomic<TimestampUs> now_;
};

}  // namespace pynenc_cpp
