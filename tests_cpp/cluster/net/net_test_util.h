// Helpers for the real-socket transport tests: a thread-safe frame collector,
// polling waits with generous deadlines, and a raw POSIX TCP client that speaks
// whatever bytes a test wants (including the handshake, built with the
// transport's own codec).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cluster/transport/address.h"
#include "cluster/transport/frame.h"
#include "cluster/transport/handshake.h"
#include "cluster/transport/record.h"
#include "pynenc_cpp/cluster/transport.h"

namespace pynenc_cpp::cluster::nettest {

// The handshake proof as an outsider computes it, from the documented
// transcript layout: unlike ComputeProof, an empty key is accepted (HMAC with a
// zero-length key), which is exactly what an attacker without the secret tries.
inline transport::Mac OutsiderProof(const std::string& secret, std::string_view label,
                                    const transport::Transcript& t) {
  std::string msg;
  auto str = [&msg](std::string_view s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    for (int shift = 24; shift >= 0; shift -= 8) msg.push_back(static_cast<char>(n >> shift));
    msg.append(s);
  };
  str(label);
  msg.push_back(static_cast<char>(t.version >> 8));
  msg.push_back(static_cast<char>(t.version & 0xff));
  str(t.cluster_name);
  str(t.client_address);
  str(t.server_address);
  msg.append(reinterpret_cast<const char*>(t.client_nonce.data()), t.client_nonce.size());
  msg.append(reinterpret_cast<const char*>(t.server_nonce.data()), t.server_nonce.size());
  static const unsigned char kNoKey = 0;
  transport::Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(),
       secret.empty() ? &kNoKey : reinterpret_cast<const unsigned char*>(secret.data()),
       static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), mac.data(), &len);
  return mac;
}

// Loaded 2-core machine: deadlines are generous; waits poll and return early.
inline constexpr auto kDeadline = std::chrono::seconds(20);

inline bool WaitUntil(const std::function<bool()>& pred,
                      std::chrono::milliseconds timeout = kDeadline) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

struct Received {
  Address from;
  std::uint8_t type;
  std::string payload;
};

// Installs itself as the env's receiver; thread-safe snapshot access.
class Collector {
 public:
  Receiver AsReceiver() {
    return [this](const Address& from, std::uint8_t type, std::string payload) {
      std::lock_guard<std::mutex> l(mu_);
      got_.push_back({from, type, std::move(payload)});
    };
  }
  std::vector<Received> Snapshot() const {
    std::lock_guard<std::mutex> l(mu_);
    return got_;
  }
  std::size_t Count() const {
    std::lock_guard<std::mutex> l(mu_);
    return got_.size();
  }

 private:
  mutable std::mutex mu_;
  std::vector<Received> got_;
};

inline TransportOptions Options(std::string secret = "s3cret", std::string cluster = "test") {
  TransportOptions o;
  o.secret = std::move(secret);
  o.cluster_name = std::move(cluster);
  o.host = "127.0.0.1";
  o.port = 0;
  o.reconnect_initial_ms = 20;
  o.reconnect_max_ms = 200;
  o.handshake_timeout_ms = 5'000;
  o.random_seed = 42;
  return o;
}

// Logs collected for assertions on what was logged.
class LogCollector {
 public:
  LogSink Sink() {
    return [this](LogLevel level, std::string_view msg) {
      std::lock_guard<std::mutex> l(mu_);
      lines_.push_back({level, std::string(msg)});
    };
  }
  std::size_t CountContaining(std::string_view needle) const {
    std::lock_guard<std::mutex> l(mu_);
    std::size_t n = 0;
    for (const auto& [lv, line] : lines_) n += line.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
  bool Contains(LogLevel level, std::string_view needle) const {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [lv, line] : lines_) {
      if (lv == level && line.find(needle) != std::string::npos) return true;
    }
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<LogLevel, std::string>> lines_;
};

inline std::uint16_t PortOf(const Address& a) {
  auto hp = transport::ParseAddress(a);
  return hp.ok() ? hp.value().port : 0;
}

// A blocking TCP client for hand-made byte streams.
class RawClient {
 public:
  explicit RawClient(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    const int one = 1;
    if (connected_) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  // Adopts an accepted socket.
  static std::unique_ptr<RawClient> Adopt(int fd) {
    return std::unique_ptr<RawClient>(new RawClient(fd, true));
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Reads until one whole frame is decoded; nullopt on close, error or timeout.
  std::optional<transport::Frame> ReadFrame(std::chrono::milliseconds timeout = kDeadline) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (pending_.empty()) {
      char buf[4096];
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            end - std::chrono::steady_clock::now())
                                            .count());
      if (left <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, left) <= 0) return std::nullopt;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return std::nullopt;
      auto r = decoder_.Feed(std::string_view(buf, static_cast<std::size_t>(n)));
      if (!r.ok()) return std::nullopt;
      for (auto& f : r.value()) pending_.push_back(std::move(f));
    }
    auto f = std::move(pending_.front());
    pending_.erase(pending_.begin());
    return f;
  }

  // True once the server has closed the connection (EOF or reset) within the
  // timeout. Any bytes that arrive first are discarded.
  bool WaitClosed(std::chrono::milliseconds timeout = kDeadline) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            end - std::chrono::steady_clock::now())
                                            .count());
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, left) <= 0) return false;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
    }
  }

  // Runs the client side of the handshake with `secret`, advertising
  // `my_address`. Returns true once the server's kAccept proof verified.
  bool Handshake(const std::string& secret, const std::string& cluster,
                 const std::string& my_address) {
    using namespace transport;
    Transcript t;
    t.cluster_name = cluster;
    t.client_address = my_address;
    if (!RandomNonce(t.client_nonce)) return false;
    Hello h;
    h.cluster_name = cluster;
    h.client_address = my_address;
    h.client_nonce = t.client_nonce;
    if (!Send(EncodeFrame(kHello, EncodeHello(h)))) return false;
    auto ch = ReadFrame();
    Challenge c;
    if (!ch || ch->type != kChallenge || !ParseChallenge(ch->body, c)) return false;
    t.server_address = c.server_address;
    t.server_nonce = c.server_nonce;
    if (!Send(EncodeFrame(kAuth, EncodeProof(Proof{OutsiderProof(secret, kClientLabel, t)})))) {
      return false;
    }
    auto acc = ReadFrame();
    Proof p;
    if (!acc || acc->type != kAccept || !ParseProof(acc->body, p)) return false;
    if (!ProofsEqual(p.mac, OutsiderProof(secret, kServerLabel, t))) return false;
    transcript_ = t;
    if (!secret.empty()) {
      auto key = DeriveClientRecordKey(secret, t);
      if (!key) return false;
      sealer_ = std::make_unique<RecordSealer>(*key);
    }
    return true;
  }

  // After Handshake: one protocol frame sealed with this connection's key at
  // the next sequence number, as the transport writes it. Returns the bytes
  // sent (empty if sending failed).
  std::string SendSealed(std::uint8_t type, std::string_view payload) {
    if (!sealer_) return {};
    std::string bytes = sealer_->Seal(type, payload);
    return !bytes.empty() && Send(bytes) ? bytes : std::string();
  }

  const transport::Transcript& transcript() const { return transcript_; }

 private:
  RawClient(int fd, bool connected) : fd_(fd), connected_(connected) {}
  int fd_ = -1;
  bool connected_ = false;
  transport::FrameDecoder decoder_{1 << 20};
  std::vector<transport::Frame> pending_;
  transport::Transcript transcript_;
  std::unique_ptr<transport::RecordSealer> sealer_;
};

// A listening socket on 127.0.0.1:<ephemeral> standing in for a peer's server;
// or on `ip`:`port` (another loopback address, say, where a test puts a party in
// the path to a node that advertises that address).
class RawListener {
 public:
  RawListener() : RawListener("127.0.0.1", 0) {}
  RawListener(const char* ip, std::uint16_t port) : ip_(ip) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (::inet_pton(AF_INET, ip, &addr.sin_addr) != 1) return;
    socklen_t len = sizeof addr;
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::listen(fd_, 16) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~RawListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawListener(const RawListener&) = delete;
  RawListener& operator=(const RawListener&) = delete;

  std::uint16_t port() const { return port_; }
  Address address() const { return ip_ + ":" + std::to_string(port_); }

  // The next accepted connection, or nullptr after `timeout`.
  std::unique_ptr<RawClient> Accept(std::chrono::milliseconds timeout = kDeadline) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return nullptr;
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return nullptr;
    return RawClient::Adopt(c);
  }

 private:
  std::string ip_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace pynenc_cpp::cluster::nettest
