// A deterministic, seeded simulator for the cluster core: a virtual clock, a
// fake network with per-link cuts and partitions, message faults (drop,
// duplicate, reorder, delay), node crashes, restarts and pauses
// (SIGSTOP/SIGCONT).
//
// Determinism: every event (timer or frame delivery) sits in one queue ordered
// by (virtual time, sequence number); all randomness comes from one generator
// seeded by the world's seed (each SimEnv's Random() has its own generator seeded
// from it when the env is created). Nothing depends on wall time or thread
// scheduling, so the same seed and the same test steps replay identically
// (TraceHash() compares two runs).
//
// Delivery model: Send() decides at send time whether the frame is dropped
// (cut link, crashed/paused/unknown sender, `drop` probability) and when it
// arrives (uniform in [min_delay_ms, max_delay_ms]; with probability `reorder`
// an extra delay of up to 2*max_delay_ms). Without reordering a link is FIFO
// (like TCP). With probability `duplicate` a second copy is sent with its own
// delay. At delivery time the frame is dropped if the link was cut meanwhile or
// the receiver is crashed or unknown; it is held if the receiver is paused.
//
// Thread safety: not thread-safe. Everything (the test body, timer callbacks,
// receivers) runs on the test's thread; callbacks run only from inside
// RunFor/RunUntil/Resume, never from inside Send/After.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/cluster/env.h"

namespace pynenc_cpp::cluster::sim {

class SimWorld;

// One node's environment. NowMs() is the world's virtual clock (shared by all
// nodes); WallMs() is a fixed base (2026-01-01T00:00:00Z) plus NowMs(). A SimEnv
// outlives a Crash/Revive (it is kept, inert, until the world is destroyed), so
// protocol objects holding a reference to an old env may still call it safely:
// after a crash its After/Send do nothing.
class SimEnv final : public Env {
 public:
  SimEnv(SimWorld& world, Address address, std::uint64_t seed, std::uint64_t generation);

  std::int64_t NowMs() override;
  std::int64_t WallMs() override;
  std::uint64_t Random() override;
  TimerId After(std::int64_t delay_ms, std::function<void()> fn) override;
  void Cancel(TimerId id) override;
  void Send(const Address& to, std::uint8_t type, std::string payload) override;
  void SetReceiver(Receiver receiver) override;
  Address LocalAddress() const override { return address_; }
  void Log(LogLevel level, std::string_view message) override;

  // False once the node was crashed or replaced by Revive.
  bool Active() const { return active_; }

 private:
  friend class SimWorld;
  SimWorld& world_;
  Address address_;
  std::mt19937_64 rng_;
  std::uint64_t generation_;
  bool active_ = true;
  Receiver receiver_;
};

class SimWorld {
 public:
  static constexpr std::int64_t kWallBaseMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

  struct Faults {
    double drop = 0, duplicate = 0, reorder = 0;
    std::int64_t min_delay_ms = 1, max_delay_ms = 5;
  };

  explicit SimWorld(std::uint64_t seed);
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  // A new node at `addr` (a fresh SimEnv; if one exists there it is replaced, as
  // by Revive). The reference stays valid until the world is destroyed.
  Env& AddNode(const Address& addr);
  // The current env at `addr`, or nullptr.
  SimEnv* EnvAt(const Address& addr);

  // Processes every event due up to Now()+ms, then sets Now() to Now()+ms.
  void RunFor(std::int64_t ms);
  // Processes events one at a time until `pred()` holds (checked before the
  // first event and after each one) or `max_ms` of virtual time passed. Returns
  // pred()'s last value.
  bool RunUntil(const std::function<bool()>& pred, std::int64_t max_ms);
  std::int64_t Now() const { return now_; }

  // The node stops receiving and sending; its timers and held frames are dropped;
  // frames in flight to it are dropped on arrival.
  void Crash(const Address& addr);
  // A fresh SimEnv at `addr` (the old one stays inert). Returns it.
  Env& Revive(const Address& addr);

  // SIGSTOP / SIGCONT. While paused the node's timers do not fire and frames to it
  // are held (not dropped); it sends nothing; virtual time keeps running. Resume
  // runs, before returning, every overdue timer (in due order) and then every held
  // frame (in arrival order).
  void Pause(const Address& addr);
  void Resume(const Address& addr);
  bool Paused(const Address& addr) const;

  // Cuts / heals the link between a and b in both directions.
  void CutLink(const Address& a, const Address& b);
  void HealLink(const Address& a, const Address& b);
  // Cuts every link between two addresses on different sides (addresses listed
  // on no side keep their links). Adds to earlier cuts.
  void Partition(const std::vector<std::vector<Address>>& sides);
  void HealAll();

  void SetFaults(Faults faults) { faults_ = faults; }

  // FNV-1a 64 over every delivered (time, from, to, type, payload), in order.
  std::uint64_t TraceHash() const { return trace_hash_; }
  std::size_t Delivered() const { return delivered_; }
  std::size_t Dropped() const { return dropped_; }

  // Receives every SimEnv::Log line (default: discarded unless the environment
  // variable PYNENC_CPP_SIM_LOG is set, then printed to stderr).
  void SetLogSink(std::function<void(const Address&, LogLevel, std::string_view)> sink) {
    log_sink_ = std::move(sink);
  }

 private:
  friend class SimEnv;
  struct Event {
    enum class Kind { kTimer, kFrame } kind;
    SimEnv* env = nullptr;      // kTimer: owner; kFrame: unused
    Env::TimerId timer_id = 0;  // kTimer
    std::function<void()> fn;   // kTimer
    Address from, to;           // kFrame
    std::uint8_t type = 0;      // kFrame
    std::string payload;        // kFrame
  };
  using Key = std::pair<std::int64_t, std::uint64_t>;  // (time, sequence)
  struct Node {
    SimEnv* env = nullptr;
    bool crashed = false;
    bool paused = false;
    std::vector<std::pair<Env::TimerId, std::function<void()>>> held_timers;
    std::vector<Event> held_frames;
  };

  Env::TimerId AddTimer(SimEnv* env, std::int64_t delay_ms, std::function<void()> fn);
  void CancelTimer(Env::TimerId id);
  void SendFrame(SimEnv* from, const Address& to, std::uint8_t type, std::string payload);
  void Enqueue(std::int64_t delay, const Address& from, const Address& to, std::uint8_t type,
               const std::string& payload);
  bool StepOne(std::int64_t limit);  // runs the next event due at or before `limit`
  void Dispatch(Event ev);
  void Deliver(const Event& ev);
  bool LinkCut(const Address& a, const Address& b) const;
  Node* Find(const Address& addr);
  double Uniform();

  std::int64_t now_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t next_timer_ = 1;
  std::mt19937_64 rng_;
  std::map<Key, Event> queue_;
  std::map<Env::TimerId, Key> timer_keys_;
  std::map<Address, Node> nodes_;
  std::vector<std::unique_ptr<SimEnv>> envs_;                         // every env ever created
  std::set<std::pair<Address, Address>> cuts_;                        // normalized (min, max)
  std::map<std::pair<Address, Address>, std::int64_t> last_arrival_;  // FIFO per directed link
  Faults faults_;
  std::uint64_t trace_hash_ = 1469598103934665603ull;
  std::size_t delivered_ = 0;
  std::size_t dropped_ = 0;
  std::function<void(const Address&, LogLevel, std::string_view)> log_sink_;
  std::vector<std::pair<Env::TimerId, std::function<void()>>>* resuming_timers_ = nullptr;
};

}  // namespace pynenc_cpp::cluster::sim
