// Private to the Asio transport: the state an AsioEnv shares with its
// connections, and the two connection classes. Nothing here leaves
// cpp/src/cluster/transport/.
//
// Thread safety: everything here is touched only on the loop thread, except
// AtomicStats (any thread) and the immutable fields set before the loop starts
// (options, local_address, log_sink).
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>, so <utility> must come before Asio.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cluster/transport/address.h"
#include "cluster/transport/frame.h"
#include "cluster/transport/handshake.h"
#include "cluster/transport/record.h"
#include "pynenc_cpp/cluster/transport.h"

namespace pynenc_cpp::cluster::transport {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct AtomicStats {
  std::atomic<std::uint64_t> frames_sent{0};
  std::atomic<std::uint64_t> frames_received{0};
  std::atomic<std::uint64_t> frames_local{0};
  std::atomic<std::uint64_t> frames_dropped{0};
  std::atomic<std::uint64_t> sends_oversize{0};
  std::atomic<std::uint64_t> handshakes_rejected{0};
  std::atomic<std::uint64_t> frames_oversize{0};
  std::atomic<std::uint64_t> frames_malformed{0};
  std::atomic<std::uint64_t> records_rejected{0};
  std::atomic<std::uint64_t> connections_established{0};
  std::atomic<std::uint64_t> reconnect_attempts{0};
  std::atomic<std::uint64_t> links_expired{0};

  static void Add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  TransportStats Snapshot() const;
};

class OutboundLink;
class InboundConn;

// Untrusted text (a peer's claimed cluster name or address, before it proved
// anything) fit for a log line: printable ASCII kept, other bytes as \xNN, at
// most 80 bytes shown, then "...".
inline std::string Printable(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

// One per AsioEnv. `io` is the first member so it is destroyed last: every
// socket and timer below (and every handler still queued in it) goes first.
struct Core {
  asio::io_context io;
  TransportOptions options;
  Address local_address;
  LogSink log_sink;
  AtomicStats stats;
  std::mt19937_64 rng;
  Receiver receiver;
  // Set when Shutdown starts: no new connections, inbound frames ignored.
  bool closing = false;
  std::map<Address, std::shared_ptr<OutboundLink>> outbound;
  std::set<std::shared_ptr<InboundConn>> inbound;
  // Inbound connections not yet authenticated (bounded by max_pending_handshakes),
  // and their count per source IP (bounded by max_pending_handshakes_per_source).
  std::size_t pending_handshakes = 0;
  std::map<std::string, std::size_t> pending_by_source;
  // Client nonces of our own outbound handshakes in progress: a HELLO that
  // carries one is our own HELLO relayed back to us (a reflection), refused.
  std::set<Nonce> own_hello_nonces;
  // Refusal warnings: those logged in the current one-second window, and those
  // not logged since the last one that was.
  std::chrono::steady_clock::time_point refusal_window{};
  int refusals_in_window = 0;
  std::uint64_t refusals_unlogged = 0;

  void Log(LogLevel level, std::string_view message) const;
  // A Warning about a refused or closed connection, rate-limited
  // (refusal_logs_per_second); a logged one says how many were not.
  void LogRefusal(const std::string& message);
  // Hands one protocol frame to the receiver; an exception from it is caught
  // and logged (never propagates into Asio).
  void Deliver(const Address& from, std::uint8_t type, std::string payload);
};

// Our side of the one connection that carries our frames to `peer`.
// Lifecycle: kIdle -> kConnecting -> kHandshaking -> kReady; any failure ->
// kBackoff (frames queued) or closed and removed from Core::outbound (none
// queued; kIdle only while the transport shuts down); Close() -> kClosed, final.
// Frames queue in every state but kClosed (bounded, drop-oldest, control and
// data frames in separate queues) and are written only in kReady: control
// frames first, each class in Send order. A link that fails for
// outbound_expiry_ms in a row closes and removes itself from Core::outbound.
class OutboundLink : public std::enable_shared_from_this<OutboundLink> {
 public:
  OutboundLink(Core& core, Address peer, HostPort target);

  // Queues one encoded frame of protocol `type`; starts connecting if idle.
  void Enqueue(std::string frame, std::uint8_t type);
  // True while queued or in-flight frames could still be written soon (the link
  // is connecting, handshaking or ready; not in backoff).
  bool Flushable() const;
  // Closes the socket and drops what is queued. Idempotent.
  void Close();

 private:
  enum class State : std::uint8_t { kIdle, kConnecting, kHandshaking, kReady, kBackoff, kClosed };

  void StartConnect();
  void OnConnected(std::uint64_t gen, const boost::system::error_code& ec);
  void StartRead(std::uint64_t gen);
  void OnFrame(Frame frame);
  void PumpWrites();
  void WriteControl(std::string frame);
  // Ends the current attempt: `level` logs `why`; reconnects after a backoff
  // if frames are queued, else (or once failing for outbound_expiry_ms) Forget()s.
  void Fail(LogLevel level, const std::string& why);
  // Why the server of this attempt is not the peer we dialed (empty: it may be),
  // from the advertised address in its CHALLENGE. See OnFrame.
  std::string WrongServer(const Address& server_address) const;
  // Removes this attempt's client nonce from Core::own_hello_nonces.
  void ForgetNonce();
  // Close(), then removes this link from Core::outbound.
  void Forget();
  std::int64_t NextBackoffMs();

  Core& core_;
  const Address peer_;
  const HostPort target_;
  State state_ = State::kIdle;
  std::uint64_t gen_ = 0;  // bumped per attempt; stale handlers compare and return
  tcp::socket socket_;
  tcp::resolver resolver_;
  asio::steady_timer timer_;         // connect+handshake deadline, then the backoff
  std::deque<std::string> control_;  // handshake frames, written before data
  // Protocol frames as PrepareRecord() strings, sealed when they are written.
  std::deque<std::string> priority_;  // protocol control frames (type < kActorTypeBase)
  std::deque<std::string> queue_;     // protocol data frames (actors)
  // When the current streak of failed attempts began (meaningful while failures_ > 0).
  std::chrono::steady_clock::time_point failing_since_{};
  bool writing_ = false;
  std::size_t inflight_data_frames_ = 0;  // protocol frames in the current write
  bool dropping_control_ = false;  // a drop from priority_ was logged since it last drained
  bool dropping_data_ = false;     // a drop from queue_ was logged since it last drained
  int failures_ = 0;               // consecutive failed attempts (backoff exponent)
  FrameDecoder decoder_{kMaxHandshakeBodyBytes};
  std::array<char, 4096> read_buf_{};
  Transcript transcript_;
  bool nonce_listed_ = false;  // transcript_.client_nonce is in Core::own_hello_nonces
  bool challenged_ = false;
  std::unique_ptr<RecordSealer> sealer_;  // set once kReady (this attempt's key)
};

// The server side of one accepted connection: handshake, then frames delivered
// with the peer's authenticated listen address as `from`. It never writes
// protocol frames (our frames to that peer travel on our own OutboundLink).
class InboundConn : public std::enable_shared_from_this<InboundConn> {
 public:
  InboundConn(Core& core, tcp::socket socket, std::uint64_t accept_seq);
  bool pending() const { return state_ == State::kAwaitHello || state_ == State::kAwaitAuth; }
  const std::string& source() const { return source_; }
  std::uint64_t accept_seq() const { return accept_seq_; }
  // Closes a pending connection to make room for a newer one (counted, logged).
  void Evict(const std::string& why) { Reject(nullptr, why); }
  void Start();
  // Closes the socket and removes this connection from Core::inbound. Idempotent.
  void Close();

 private:
  enum class State : std::uint8_t { kAwaitHello, kAwaitAuth, kOpen, kClosed };

  void Read();
  // Leaves the pending-handshake counts (global and per source).
  void LeavePending();
  // Returns false once the connection is closed.
  bool OnFrame(Frame frame);
  void Write(std::string frame);
  void WriteNext();
  // Counts `counter` (if any), plus handshakes_rejected before kOpen; logs a
  // Warning naming the remote endpoint; closes.
  void Reject(std::atomic<std::uint64_t>* counter, const std::string& why);

  Core& core_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::string remote_;  // ip:port of the socket, for logs
  std::string source_;  // ip of the socket (per-source handshake accounting)
  std::uint64_t accept_seq_ = 0;  // accept order (the oldest pending is evicted first)
  State state_ = State::kAwaitHello;
  FrameDecoder decoder_{kMaxHandshakeBodyBytes};
  std::array<char, 16 * 1024> read_buf_{};
  std::deque<std::string> writes_;
  bool writing_ = false;
  Transcript transcript_;
  Address peer_address_;  // authenticated advertised address once kOpen
  std::unique_ptr<RecordOpener> opener_;  // set once kOpen
};

}  // namespace pynenc_cpp::cluster::transport
