// The one environment behind which every source of nondeterminism of the
// cluster core sits: monotonic and wall clocks, timers, randomness, the
// transport and logging. Production uses the Boost.Asio environment
// (transport.h: MakeAsioEnv); tests_cpp/cluster uses a seeded simulator with a
// virtual clock and a fake network.
//
// Execution model (the contract every implementation keeps): timer callbacks and
// message deliveries run one at a time on the environment's single loop thread,
// never concurrently and never re-entrantly from inside Send/After. Protocol
// classes (Membership, Lease, Supervisor, Node logic) are therefore not
// thread-safe and need no locks: they are only touched from that loop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "pynenc_cpp/cluster/types.h"

namespace pynenc_cpp::cluster {

// Frame type tags for protocol payloads. Transport-internal frames (handshake)
// use tags below kFirstProtocolType and are never delivered to a receiver.
inline constexpr std::uint8_t kFirstProtocolType = 16;
// 16..31: membership (SWIM) messages; 32..47: lease messages; 48..63: the
// coordinator, its hosts, owner leases and the directory; 64..79: actor messages.
inline constexpr std::uint8_t kMembershipTypeBase = 16;
inline constexpr std::uint8_t kLeaseTypeBase = 32;
inline constexpr std::uint8_t kCoordinatorTypeBase = 48;
inline constexpr std::uint8_t kActorTypeBase = 64;

// Called on the loop thread for every authenticated inbound protocol frame.
// `from` is the sender's advertised listen address (authenticated by the
// handshake in production).
using Receiver = std::function<void(const Address& from, std::uint8_t type, std::string payload)>;

class Env {
 public:
  using TimerId = std::uint64_t;

  virtual ~Env() = default;
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  // Monotonic milliseconds (CLOCK_MONOTONIC in production: it keeps running while
  // the process is stopped with SIGSTOP, which the lease relies on).
  virtual std::int64_t NowMs() = 0;
  // Wall-clock milliseconds since the Unix epoch (join order only).
  virtual std::int64_t WallMs() = 0;
  // Uniform 64-bit random value (seeded in the simulator).
  virtual std::uint64_t Random() = 0;

  // Runs `fn` on the loop thread after `delay_ms` (>= 0). Returns an id for Cancel.
  virtual TimerId After(std::int64_t delay_ms, std::function<void()> fn) = 0;
  // Cancels a pending timer; a no-op for an id that already fired or is unknown.
  virtual void Cancel(TimerId id) = 0;

  // Best-effort, unordered-across-peers delivery of one protocol frame to the node
  // listening at `to`. Never blocks and never fails loudly: an unreachable peer or
  // a full send queue drops the frame (counted by the transport).
  // REQUIRES: type >= kFirstProtocolType.
  virtual void Send(const Address& to, std::uint8_t type, std::string payload) = 0;
  // Installs the receiver for inbound protocol frames (replaces any earlier one).
  virtual void SetReceiver(Receiver receiver) = 0;
  // The address this node advertises ("host:port").
  virtual Address LocalAddress() const = 0;

  virtual void Log(LogLevel level, std::string_view message) = 0;

  // Runs `work` where it may block (a storage call) without stalling the loop,
  // then `done` on the loop thread. `work` must not touch loop-thread state.
  // Default (the simulator): `work` inline, `done` through After(0), so results
  // still arrive as a separate event. Production runs `work` on a worker thread.
  virtual void RunBlocking(std::function<void()> work, std::function<void()> done) {
    work();
    After(0, std::move(done));
  }
};

}  // namespace pynenc_cpp::cluster
