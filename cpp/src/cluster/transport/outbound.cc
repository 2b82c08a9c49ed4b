// OutboundLink: connect, client side of the handshake, queued writes, backoff.
#include <openssl/crypto.h>

#include <algorithm>

#include "cluster/transport/backoff.h"
#include "cluster/transport/core.h"

namespace pynenc_cpp::cluster::transport {

namespace {
// At most this many frames / bytes go into one gathered write.
constexpr std::size_t kMaxBatchFrames = 64;
constexpr std::size_t kMaxBatchBytes = 256 * 1024;
}  // namespace

OutboundLink::OutboundLink(Core& core, Address peer, HostPort target)
    : core_(core),
      peer_(std::move(peer)),
      target_(std::move(target)),
      socket_(core.io),
      resolver_(core.io),
      timer_(core.io) {}

void OutboundLink::Enqueue(std::string frame, std::uint8_t type) {
  if (state_ == State::kClosed) {
    AtomicStats::Add(core_.stats.frames_dropped);
    return;
  }
  const bool control = type < kActorTypeBase;
  std::deque<std::string>& q = control ? priority_ : queue_;
  q.push_back(std::move(frame));
  if (q.size() > core_.options.send_queue_bound) {
    q.pop_front();
    AtomicStats::Add(core_.stats.frames_dropped);
    bool& dropping = control ? dropping_control_ : dropping_data_;
    if (!dropping) {
      dropping = true;
      core_.Log(LogLevel::kWarning, std::string(control ? "control" : "data") +
                                        " send queue to " + peer_ + " full (" +
                                        std::to_string(core_.options.send_queue_bound) +
                                        " frames): dropping the oldest");
    }
  }
  if (state_ == State::kIdle) {
    StartConnect();
  } else if (state_ == State::kReady) {
    PumpWrites();
  }
}

bool OutboundLink::Flushable() const {
  const bool pending = !queue_.empty() || !priority_.empty() || writing_;
  return pending &&
         (state_ == State::kConnecting || state_ == State::kHandshaking || state_ == State::kReady);
}

void OutboundLink::Close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  ++gen_;
  ForgetNonce();
  boost::system::error_code ignored;
  resolver_.cancel();
  timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  AtomicStats::Add(core_.stats.frames_dropped,
                   queue_.size() + priority_.size() + inflight_data_frames_);
  inflight_data_frames_ = 0;
  queue_.clear();
  priority_.clear();
  control_.clear();
}

void OutboundLink::StartConnect() {
  if (core_.closing) return;
  const std::uint64_t gen = ++gen_;
  state_ = State::kConnecting;
  ForgetNonce();
  decoder_ = FrameDecoder(kMaxHandshakeBodyBytes);
  control_.clear();
  challenged_ = false;
  sealer_.reset();
  writing_ = false;
  auto self = shared_from_this();
  timer_.expires_after(std::chrono::milliseconds(core_.options.handshake_timeout_ms));
  timer_.async_wait([self, gen](const boost::system::error_code& ec) {
    if (ec || gen != self->gen_) return;
    // Unreachable peers are routine (Debug); a stalled handshake is not.
    self->Fail(self->state_ == State::kHandshaking ? LogLevel::kWarning : LogLevel::kDebug,
               self->state_ == State::kHandshaking ? "handshake timed out" : "connect timed out");
  });
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(target_.host, ec);
  if (!ec) {
    socket_.async_connect(
        tcp::endpoint(ip, target_.port),
        [self, gen](const boost::system::error_code& e) { self->OnConnected(gen, e); });
    return;
  }
  resolver_.async_resolve(
      target_.host, std::to_string(target_.port),
      [self, gen](const boost::system::error_code& e, const tcp::resolver::results_type& results) {
        if (gen != self->gen_) return;
        if (e) return self->Fail(LogLevel::kDebug, "cannot resolve: " + e.message());
        asio::async_connect(self->socket_, results,
                            [self, gen](const boost::system::error_code& e2, const tcp::endpoint&) {
                              self->OnConnected(gen, e2);
                            });
      });
}

void OutboundLink::OnConnected(std::uint64_t gen, const boost::system::error_code& ec) {
  if (gen != gen_) return;
  if (ec) return Fail(LogLevel::kDebug, "connect failed: " + ec.message());
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  socket_.set_option(asio::socket_base::keep_alive(true), ignored);
  state_ = State::kHandshaking;
  transcript_ = Transcript{};
  transcript_.cluster_name = core_.options.cluster_name;
  transcript_.client_address = core_.local_address;
  if (!RandomNonce(transcript_.client_nonce)) return Fail(LogLevel::kError, "RAND_bytes failed");
  nonce_listed_ = core_.own_hello_nonces.insert(transcript_.client_nonce).second;
  Hello hello;
  hello.cluster_name = transcript_.cluster_name;
  hello.client_address = transcript_.client_address;
  hello.client_nonce = transcript_.client_nonce;
  WriteControl(EncodeFrame(kHello, EncodeHello(hello)));
  StartRead(gen);
}

void OutboundLink::StartRead(std::uint64_t gen) {
  auto self = shared_from_this();
  socket_.async_read_some(
      asio::buffer(read_buf_), [self, gen](const boost::system::error_code& ec, std::size_t n) {
        if (gen != self->gen_) return;
        if (ec) {
          const bool during_handshake = self->state_ != State::kReady;
          return self->Fail(during_handshake ? LogLevel::kWarning : LogLevel::kInfo,
                            during_handshake ? "closed during the handshake (" + ec.message() +
                                                   "): wrong secret or cluster name on one side?"
                                             : "connection lost: " + ec.message());
        }
        auto frames = self->decoder_.Feed(std::string_view(self->read_buf_.data(), n));
        if (!frames.ok()) {
          AtomicStats::Add(self->decoder_.error() == FrameError::kOversize
                               ? self->core_.stats.frames_oversize
                               : self->core_.stats.frames_malformed);
          return self->Fail(LogLevel::kWarning, "bad frame: " + frames.status().message());
        }
        for (auto& f : frames.value()) {
          self->OnFrame(std::move(f));
          if (gen != self->gen_) return;  // failed (or closed) while handling it
        }
        self->StartRead(gen);
      });
}

void OutboundLink::OnFrame(Frame frame) {
  const auto reject = [&](std::atomic<std::uint64_t>& counter, const std::string& why) {
    AtomicStats::Add(counter);
    AtomicStats::Add(core_.stats.handshakes_rejected);
    Fail(LogLevel::kWarning, "handshake refused: " + why);
  };
  if (state_ != State::kHandshaking) {
    return reject(core_.stats.frames_malformed, "unexpected frame after the handshake");
  }
  if (!challenged_) {
    Challenge ch;
    if (frame.type != kChallenge || !ParseChallenge(frame.body, ch)) {
      return reject(core_.stats.frames_malformed, "expected a well-formed challenge");
    }
    if (ch.version != kProtocolVersion) {
      AtomicStats::Add(core_.stats.handshakes_rejected);
      return Fail(LogLevel::kWarning,
                  "handshake refused: protocol version " + std::to_string(ch.version));
    }
    // Before any proof of ours: the client proof covers the server address, so
    // a server that is not the peer we dialed must not get one.
    if (const std::string why = WrongServer(ch.server_address); !why.empty()) {
      AtomicStats::Add(core_.stats.handshakes_rejected);
      return Fail(LogLevel::kWarning, "handshake refused: " + why);
    }
    if (ch.server_address != peer_) {
      core_.Log(LogLevel::kInfo,
                "dialed " + peer_ + ", its server advertises " + Printable(ch.server_address));
    }
    transcript_.server_address = ch.server_address;
    transcript_.server_nonce = ch.server_nonce;
    challenged_ = true;
    const auto mac = ComputeProof(core_.options.secret, kClientLabel, transcript_);
    if (!mac) return Fail(LogLevel::kError, "HMAC failed");
    WriteControl(EncodeFrame(kAuth, EncodeProof(Proof{*mac})));
    return;
  }
  Proof proof;
  if (frame.type != kAccept || !ParseProof(frame.body, proof)) {
    return reject(core_.stats.frames_malformed, "expected a well-formed accept");
  }
  const auto expected = ComputeProof(core_.options.secret, kServerLabel, transcript_);
  if (!expected || !ProofsEqual(*expected, proof.mac)) {
    AtomicStats::Add(core_.stats.handshakes_rejected);
    return Fail(LogLevel::kWarning,
                "handshake refused: the server's proof does not verify "
                "(wrong secret or cluster name)");
  }
  auto key = DeriveClientRecordKey(core_.options.secret, transcript_);
  if (!key) return Fail(LogLevel::kError, "deriving the record key failed");
  sealer_ = std::make_unique<RecordSealer>(*key);
  OPENSSL_cleanse(&*key, sizeof *key);
  ForgetNonce();
  state_ = State::kReady;
  failures_ = 0;
  decoder_.SetMaxBodyBytes(0);  // the server sends nothing after kAccept
  AtomicStats::Add(core_.stats.connections_established);
  core_.Log(LogLevel::kDebug, "connected to " + peer_ + " (" + transcript_.server_address + ")");
  PumpWrites();
}

void OutboundLink::WriteControl(std::string frame) {
  control_.push_back(std::move(frame));
  PumpWrites();
}

void OutboundLink::PumpWrites() {
  if (writing_ || state_ == State::kClosed) return;
  // The batch is owned by the write handler, so its bytes outlive the operation
  // whatever happens to this link meanwhile.
  auto batch = std::make_shared<std::vector<std::string>>();
  bool data = false;
  if (!control_.empty()) {
    batch->push_back(std::move(control_.front()));
    control_.pop_front();
  } else if (state_ == State::kReady && (!priority_.empty() || !queue_.empty())) {
    data = true;
    std::size_t bytes = 0;
    // Control frames first, then data, both in Send order; each is sealed with
    // the next sequence number as it joins the batch (so in write order).
    for (std::deque<std::string>* q : {&priority_, &queue_}) {
      while (!q->empty() && batch->size() < kMaxBatchFrames && bytes < kMaxBatchBytes) {
        bytes += q->front().size();
        batch->push_back(std::move(q->front()));
        q->pop_front();
        if (!sealer_->SealInPlace(batch->back())) {
          AtomicStats::Add(core_.stats.frames_dropped, batch->size());
          Fail(LogLevel::kError, "sealing a frame failed (OpenSSL)");
          return;
        }
      }
    }
  } else {
    if (priority_.empty()) dropping_control_ = false;
    if (queue_.empty()) dropping_data_ = false;
    return;
  }
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(batch->size());
  for (const auto& f : *batch) buffers.push_back(asio::buffer(f));
  writing_ = true;
  inflight_data_frames_ = data ? batch->size() : 0;
  auto self = shared_from_this();
  const std::uint64_t gen = gen_;
  asio::async_write(socket_, buffers,
                    [self, gen, batch](const boost::system::error_code& ec, std::size_t) {
                      if (gen != self->gen_) return;
                      if (ec) return self->Fail(LogLevel::kInfo, "write failed: " + ec.message());
                      self->writing_ = false;
                      AtomicStats::Add(self->core_.stats.frames_sent, self->inflight_data_frames_);
                      self->inflight_data_frames_ = 0;
                      self->PumpWrites();
                    });
}

void OutboundLink::Forget() {
  auto self = shared_from_this();  // the map may hold the last reference
  Close();
  auto it = core_.outbound.find(peer_);
  if (it != core_.outbound.end() && it->second.get() == this) core_.outbound.erase(it);
}

std::int64_t OutboundLink::NextBackoffMs() {
  return BackoffDelayMs(core_.options.reconnect_initial_ms, core_.options.reconnect_max_ms,
                        failures_, core_.rng());
}

std::string OutboundLink::WrongServer(const Address& server_address) const {
  if (server_address == core_.local_address) {
    // We never dial our own address (Send delivers those frames locally).
    return "the server is this node itself (" + Printable(server_address) +
           "): a seed or peer address that names this node another way, or our own "
           "handshake relayed back to us by someone without the secret";
  }
  if (server_address == peer_) return "";
  // Compared only where both are IP literals (same address, same port; IPv6 in
  // any spelling): a host name on either side would need resolving, and seeds
  // given by name may reach a node that advertises another one.
  boost::system::error_code ec;
  const auto dialed = asio::ip::make_address(target_.host, ec);
  if (ec) return "";
  auto advertised = ParseAddress(server_address);
  if (advertised.ok()) {
    const auto ip = asio::ip::make_address(advertised.value().host, ec);
    if (ec) return "";
    if (ip == dialed && advertised.value().port == target_.port) return "";
  }
  return "dialed " + peer_ + " but the server advertises " + Printable(server_address) +
         ": a relayed connection, or an address that is not the one this node advertises "
         "(list seeds and peers by the address each node advertises)";
}

void OutboundLink::ForgetNonce() {
  if (!nonce_listed_) return;
  core_.own_hello_nonces.erase(transcript_.client_nonce);
  nonce_listed_ = false;
}

void OutboundLink::Fail(LogLevel level, const std::string& why) {
  if (state_ == State::kClosed) return;
  const std::uint64_t gen = ++gen_;
  ForgetNonce();
  boost::system::error_code ignored;
  resolver_.cancel();
  timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  // Frames in a failed write may or may not have arrived; they are not resent.
  AtomicStats::Add(core_.stats.frames_dropped, inflight_data_frames_);
  inflight_data_frames_ = 0;
  control_.clear();
  writing_ = false;
  const auto now = std::chrono::steady_clock::now();
  if (failures_++ == 0) failing_since_ = now;
  core_.Log(level, "link to " + peer_ + ": " + why);
  if (core_.closing) {
    state_ = State::kIdle;
    return;
  }
  if (now - failing_since_ >= std::chrono::milliseconds(core_.options.outbound_expiry_ms)) {
    // Gone for long enough: forget the link and what it queued.
    core_.Log(LogLevel::kInfo, "link to " + peer_ + " expired after " +
                                   std::to_string(core_.options.outbound_expiry_ms) +
                                   " ms of failed attempts: " +
                                   std::to_string(queue_.size() + priority_.size()) +
                                   " queued frames dropped");
    AtomicStats::Add(core_.stats.links_expired);
    return Forget();
  }
  if (queue_.empty() && priority_.empty()) {
    // Nothing to send: forget the link (no timer, no entry); a later Send starts a
    // new one whose failures count from zero.
    return Forget();
  }
  state_ = State::kBackoff;
  auto self = shared_from_this();
  timer_.expires_after(std::chrono::milliseconds(NextBackoffMs()));
  timer_.async_wait([self, gen](const boost::system::error_code& ec) {
    if (ec || gen != self->gen_ || self->state_ != State::kBackoff) return;
    AtomicStats::Add(self->core_.stats.reconnect_attempts);
    self->StartConnect();
  });
}

}  // namespace pynenc_cpp::cluster::transport
