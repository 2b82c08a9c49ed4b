// InboundConn: server side of the handshake, then frame delivery.
#include <openssl/crypto.h>

#include "cluster/transport/core.h"

namespace pynenc_cpp::cluster::transport {

InboundConn::InboundConn(Core& core, tcp::socket socket, std::uint64_t accept_seq)
    : core_(core), socket_(std::move(socket)), timer_(core.io), accept_seq_(accept_seq) {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  remote_ = ec ? "unknown" : FormatAddress(ep.address().to_string(), ep.port());
  source_ = ec ? "unknown" : ep.address().to_string();
}

void InboundConn::Start() {
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  // Reclaims connections from hosts that vanished without a FIN or RST.
  socket_.set_option(asio::socket_base::keep_alive(true), ignored);
  auto self = shared_from_this();
  timer_.expires_after(std::chrono::milliseconds(core_.options.handshake_timeout_ms));
  timer_.async_wait([self](const boost::system::error_code& ec) {
    if (ec || self->state_ == State::kOpen || self->state_ == State::kClosed) return;
    self->Reject(nullptr, "handshake timed out");
  });
  Read();
}

void InboundConn::LeavePending() {
  --core_.pending_handshakes;
  auto it = core_.pending_by_source.find(source_);
  if (it != core_.pending_by_source.end() && --it->second == 0) core_.pending_by_source.erase(it);
}

void InboundConn::Close() {
  if (state_ == State::kClosed) return;
  if (state_ != State::kOpen) LeavePending();
  state_ = State::kClosed;
  boost::system::error_code ignored;
  timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  core_.inbound.erase(shared_from_this());
}

void InboundConn::Reject(std::atomic<std::uint64_t>* counter, const std::string& why) {
  if (counter != nullptr) AtomicStats::Add(*counter);
  if (state_ != State::kOpen) {
    AtomicStats::Add(core_.stats.handshakes_rejected);
    core_.LogRefusal("refused connection from " + remote_ + ": " + why);
  } else {
    core_.LogRefusal("closed connection from " + peer_address_ + " (" + remote_ + "): " + why);
  }
  Close();
}

void InboundConn::Read() {
  auto self = shared_from_this();
  socket_.async_read_some(
      asio::buffer(read_buf_), [self](const boost::system::error_code& ec, std::size_t n) {
        if (self->state_ == State::kClosed) return;
        if (ec) {
          if (self->state_ != State::kOpen) {
            self->Reject(nullptr, "closed during the handshake: " + ec.message());
          } else {
            self->core_.Log(LogLevel::kDebug,
                            "connection from " + self->peer_address_ + " ended: " + ec.message());
            self->Close();
          }
          return;
        }
        auto frames = self->decoder_.Feed(std::string_view(self->read_buf_.data(), n));
        if (!frames.ok()) {
          auto& counter = self->decoder_.error() == FrameError::kOversize
                              ? self->core_.stats.frames_oversize
                              : self->core_.stats.frames_malformed;
          return self->Reject(&counter, frames.status().message());
        }
        for (auto& f : frames.value()) {
          if (!self->OnFrame(std::move(f))) return;
        }
        self->Read();
      });
}

bool InboundConn::OnFrame(Frame frame) {
  auto& malformed = core_.stats.frames_malformed;
  switch (state_) {
    case State::kAwaitHello: {
      Hello hello;
      if (frame.type != kHello || !ParseHello(frame.body, hello)) {
        Reject(&malformed, "expected a well-formed hello");
        return false;
      }
      if (hello.version != kProtocolVersion) {
        Reject(nullptr, "protocol version " + std::to_string(hello.version));
        return false;
      }
      if (hello.cluster_name != core_.options.cluster_name) {
        Reject(nullptr, "cluster name '" + Printable(hello.cluster_name) + "' is not ours");
        return false;
      }
      // Our own HELLO relayed back to us: whoever relays it holds no secret but
      // would get our client proof verified by our own server (a reflection).
      if (hello.client_address == core_.local_address ||
          core_.own_hello_nonces.count(hello.client_nonce) != 0) {
        Reject(nullptr, "a hello claiming this node's own address or nonce "
                        "(a reflected connection)");
        return false;
      }
      transcript_ = Transcript{};
      transcript_.cluster_name = hello.cluster_name;
      transcript_.client_address = hello.client_address;
      transcript_.client_nonce = hello.client_nonce;
      transcript_.server_address = core_.local_address;
      if (!RandomNonce(transcript_.server_nonce)) {
        Reject(nullptr, "RAND_bytes failed");
        return false;
      }
      Challenge ch;
      ch.server_address = transcript_.server_address;
      ch.server_nonce = transcript_.server_nonce;
      Write(EncodeFrame(kChallenge, EncodeChallenge(ch)));
      state_ = State::kAwaitAuth;
      return true;
    }
    case State::kAwaitAuth: {
      Proof proof;
      if (frame.type != kAuth || !ParseProof(frame.body, proof)) {
        Reject(&malformed, "expected a well-formed auth");
        return false;
      }
      const auto expected = ComputeProof(core_.options.secret, kClientLabel, transcript_);
      if (!expected || !ProofsEqual(*expected, proof.mac)) {
        Reject(nullptr, "proof does not verify (wrong secret), claimed address " +
                            Printable(transcript_.client_address));
        return false;
      }
      const auto ours = ComputeProof(core_.options.secret, kServerLabel, transcript_);
      auto key = DeriveClientRecordKey(core_.options.secret, transcript_);
      if (!ours || !key) {
        if (key) OPENSSL_cleanse(&*key, sizeof *key);
        Reject(nullptr, "HMAC failed");
        return false;
      }
      opener_ = std::make_unique<RecordOpener>(*key);
      OPENSSL_cleanse(&*key, sizeof *key);
      Write(EncodeFrame(kAccept, EncodeProof(Proof{*ours})));
      state_ = State::kOpen;
      LeavePending();
      peer_address_ = transcript_.client_address;
      decoder_.SetMaxBodyBytes(core_.options.max_frame_bytes + kRecordOverhead);
      timer_.cancel();
      AtomicStats::Add(core_.stats.connections_established);
      core_.Log(LogLevel::kDebug, "accepted " + peer_address_ + " from " + remote_);
      return true;
    }
    case State::kOpen: {
      // Only sealed frames after the handshake: nothing unauthenticated is decoded.
      if (frame.type != kSealed) {
        Reject(&malformed, "frame type " + std::to_string(frame.type) +
                               " after the handshake (only sealed frames are accepted)");
        return false;
      }
      auto opened = opener_->Open(std::move(frame));
      if (!opened) {
        Reject(&core_.stats.records_rejected,
               "a sealed frame did not open (forged, altered, replayed or reordered)");
        return false;
      }
      if (opened->type < kFirstProtocolType) {
        Reject(&malformed,
               "transport frame type " + std::to_string(opened->type) + " inside a sealed frame");
        return false;
      }
      if (core_.closing) return true;
      AtomicStats::Add(core_.stats.frames_received);
      core_.Deliver(peer_address_, opened->type, std::move(opened->body));
      return state_ != State::kClosed;
    }
    case State::kClosed:
      return false;
  }
  return false;
}

void InboundConn::Write(std::string frame) {
  writes_.push_back(std::move(frame));
  WriteNext();
}

void InboundConn::WriteNext() {
  if (writing_ || writes_.empty() || state_ == State::kClosed) return;
  writing_ = true;
  auto self = shared_from_this();
  auto bytes = std::make_shared<std::string>(std::move(writes_.front()));
  writes_.pop_front();
  asio::async_write(socket_, asio::buffer(*bytes),
                    [self, bytes](const boost::system::error_code& ec, std::size_t) {
                      self->writing_ = false;
                      if (self->state_ == State::kClosed) return;
                      if (ec) return self->Reject(nullptr, "write failed: " + ec.message());
                      self->WriteNext();
                    });
}

}  // namespace pynenc_cpp::cluster::transport
