// The production environment: Boost.Asio TCP transport + steady timers on one
// loop thread. Asio itself stays out of this header (pimpl behind a factory).
//
// Wire format, handshake and limits are specified in docs/cluster/transport.md.
// Summary: frames are [u32 big-endian length][u8 version][u8 type][body], where
// length counts version+type+body and is checked against max_frame_bytes before
// any of the body is read. Every connection starts with an HMAC-SHA256
// challenge-response over the shared secret and the cluster name; a peer that
// fails it is refused and logged. One outbound connection per peer carries our
// frames to it (bounded drop-oldest queue, reconnect with exponential backoff,
// TCP_NODELAY); inbound connections only receive.
//
// Thread safety: the Env methods follow env.h (call them from the loop thread,
// i.e. from inside timer callbacks / the receiver, or via Post). As a courtesy,
// Send, SetReceiver, After and Cancel called from another thread are posted to
// the loop and applied there in call order. Stats(), Post(), LocalAddress() and
// Shutdown() are safe from any thread. Random() is loop-thread only.
// A frame sent to LocalAddress() is delivered through the loop, not a socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster {

struct TransportOptions {
  std::string cluster_name = "pynenc-cpp";
  // Shared cluster secret; required. There is no empty key (on loopback every
  // local process could compute it): an empty secret fails with kBadConfig.
  std::string secret;
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port (LocalAddress() tells which)
  // Host put in LocalAddress() and the handshake (what peers dial); empty: `host`.
  // Set it when binding a wildcard such as 0.0.0.0.
  std::string advertise_host;
  std::size_t max_frame_bytes = 256 * 1024;
  // Frames per peer and per class, the oldest dropped beyond it. Control frames
  // (membership, lease, election, coordinator: types below kActorTypeBase) have
  // their own queue, written first, so actor traffic to a slow peer never evicts
  // a ping or a lease grant.
  std::size_t send_queue_bound = 1024;
  // A link that has not reached its peer for this long (every attempt failed)
  // is removed with what it queued (counted in frames_dropped and links_expired);
  // a later Send to that address starts afresh. So addresses that are gone do
  // not keep queues and reconnect timers forever.
  std::int64_t outbound_expiry_ms = 60'000;
  std::int64_t reconnect_initial_ms = 200;
  std::int64_t reconnect_max_ms = 10'000;
  // Connect plus the whole handshake must finish within this, on both sides.
  std::int64_t handshake_timeout_ms = 2'000;
  // Accepted connections still in their handshake, at most. A connection
  // accepted beyond it evicts the oldest pending one (counted in
  // handshakes_rejected), so idle sockets held open by a flood do not keep a
  // peer out: a peer's handshake completes within a round trip of its accept
  // (only a flood faster than that, from several addresses, can evict it).
  std::size_t max_pending_handshakes = 128;
  // Pending handshakes from one source IP, at most; beyond it that source's
  // oldest pending one is evicted (so one host cannot take every slot).
  std::size_t max_pending_handshakes_per_source = 32;
  // Warnings about refused connections, at most this many per second; the
  // rest are counted and summarised in the next one (a flood cannot flood the log).
  int refusal_logs_per_second = 10;
  std::uint64_t random_seed = 0;  // 0: seeded from std::random_device
};

// Counters; all monotonically increasing.
struct TransportStats {
  // Frames over sockets (frames a node sends itself are counted in frames_local).
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_received = 0;
  std::uint64_t frames_local = 0;  // sent to LocalAddress(), delivered through the loop
  // Send queue full (oldest dropped), lost in a failed write, or queued at Shutdown.
  std::uint64_t frames_dropped = 0;
  std::uint64_t sends_oversize = 0;       // Send payload over max_frame_bytes (dropped, never sent)
  std::uint64_t handshakes_rejected = 0;  // wrong secret, other cluster, bad version, timeout
  std::uint64_t frames_oversize = 0;      // length over max_frame_bytes (connection closed)
  std::uint64_t frames_malformed = 0;     // bad version / type / handshake body (connection closed)
  // Sealed frames that did not open: forged, altered, replayed, reordered or
  // sealed for another connection (connection closed, nothing delivered).
  std::uint64_t records_rejected = 0;
  std::uint64_t connections_established = 0;
  std::uint64_t reconnect_attempts = 0;
  std::uint64_t links_expired = 0;  // outbound links removed after outbound_expiry_ms of failures
};

// Called on the loop thread, and on any thread that calls Env::Log; it must be
// thread-safe if Env::Log is used off the loop. Exceptions from it are swallowed.
using LogSink = std::function<void(LogLevel, std::string_view)>;

class AsioEnv : public Env {
 public:
  // Counters, safe from any thread.
  virtual TransportStats Stats() const = 0;
  // Runs `fn` on the loop thread. Safe from any thread; dropped after Shutdown.
  virtual void Post(std::function<void()> fn) = 0;
  // Flushes queued frames (bounded by `flush_ms`), closes every socket and joins
  // the loop thread. Idempotent; safe from any thread except the loop thread.
  virtual void Shutdown(std::int64_t flush_ms = 200) = 0;
};

// Binds and starts listening, then starts the loop thread.
// Errors: kBadConfig for a malformed host, a non-loopback host without a secret,
// an empty cluster name or zero limits; kBackendFailure when the address cannot be
// bound (the message names it, e.g. "address already in use").
Result<std::unique_ptr<AsioEnv>> MakeAsioEnv(const TransportOptions& options, LogSink log_sink);

}  // namespace pynenc_cpp::cluster
