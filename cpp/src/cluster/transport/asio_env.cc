// AsioEnv: the loop thread, timers, the listener, Send routing, Shutdown and
// the MakeAsioEnv factory. Connections live in outbound.cc and inbound.cc.
#include <cxxabi.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "cluster/transport/address.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "cluster/transport/core.h"

namespace pynenc_cpp::cluster::transport {

TransportStats AtomicStats::Snapshot() const {
  TransportStats s;
  s.frames_sent = frames_sent.load(std::memory_order_relaxed);
  s.frames_received = frames_received.load(std::memory_order_relaxed);
  s.frames_local = frames_local.load(std::memory_order_relaxed);
  s.frames_dropped = frames_dropped.load(std::memory_order_relaxed);
  s.sends_oversize = sends_oversize.load(std::memory_order_relaxed);
  s.handshakes_rejected = handshakes_rejected.load(std::memory_order_relaxed);
  s.frames_oversize = frames_oversize.load(std::memory_order_relaxed);
  s.frames_malformed = frames_malformed.load(std::memory_order_relaxed);
  s.records_rejected = records_rejected.load(std::memory_order_relaxed);
  s.connections_established = connections_established.load(std::memory_order_relaxed);
  s.reconnect_attempts = reconnect_attempts.load(std::memory_order_relaxed);
  s.links_expired = links_expired.load(std::memory_order_relaxed);
  return s;
}

void Core::Log(LogLevel level, std::string_view message) const {
  if (!log_sink) return;
  try {
    log_sink(level, message);
  } catch (const abi::__forced_unwind&) {
    throw;  // the thread is being ended (pthread_exit): let it unwind
  } catch (...) {
    // A failing sink must not take the transport down; nothing else to tell.
  }
}

void Core::LogRefusal(const std::string& message) {
  const auto now = std::chrono::steady_clock::now();
  if (now - refusal_window >= std::chrono::seconds(1)) {
    refusal_window = now;
    refusals_in_window = 0;
  }
  if (refusals_in_window >= options.refusal_logs_per_second) {
    ++refusals_unlogged;
    return;
  }
  ++refusals_in_window;
  if (refusals_unlogged > 0) {
    Log(LogLevel::kWarning, message + " (and " + std::to_string(refusals_unlogged) +
                                " earlier refusals not logged: over " +
                                std::to_string(options.refusal_logs_per_second) + " per second)");
    refusals_unlogged = 0;
    return;
  }
  Log(LogLevel::kWarning, message);
}

void Core::Deliver(const Address& from, std::uint8_t type, std::string payload) {
  if (!receiver) return;
  try {
    receiver(from, type, std::move(payload));
  } catch (const std::exception& e) {
    Log(LogLevel::kError, std::string("receiver threw: ") + e.what());
  } catch (const abi::__forced_unwind&) {
    throw;
  } catch (...) {
    Log(LogLevel::kError, "receiver threw a non-std exception");
  }
}

// Not in an anonymous namespace: MakeAsioEnv (namespace cluster) names it.
class AsioEnvImpl final : public AsioEnv {
 public:
  AsioEnvImpl(const TransportOptions& options, LogSink sink)
      : acceptor_(core_.io), work_(asio::make_work_guard(core_.io)) {
    core_.options = options;
    core_.log_sink = std::move(sink);
    core_.rng.seed(options.random_seed != 0
                       ? options.random_seed
                       : (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
                             std::random_device{}());
  }
  ~AsioEnvImpl() override { Shutdown(0); }

  // Binds and listens (caller's thread, before the loop exists).
  Status Listen(const asio::ip::address& ip, const std::string& host);
  void StartLoop() {
    MutexLock lock(shutdown_mu_);
    thread_ = std::thread([this] { Run(); });
  }

  std::int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  std::int64_t WallMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::uint64_t Random() override { return core_.rng(); }

  TimerId After(std::int64_t delay_ms, std::function<void()> fn) override;
  void Cancel(TimerId id) override;
  void Send(const Address& to, std::uint8_t type, std::string payload) override;
  void SetReceiver(Receiver receiver) override;
  Address LocalAddress() const override { return core_.local_address; }
  void Log(LogLevel level, std::string_view message) override { core_.Log(level, message); }

  TransportStats Stats() const override { return core_.stats.Snapshot(); }
  void Post(std::function<void()> fn) override;
  void Shutdown(std::int64_t flush_ms) override;

 private:
  // True on the loop thread (inside a handler run by the io_context).
  bool OnLoop() { return core_.io.get_executor().running_in_this_thread(); }
  void StartTimer(TimerId id, std::int64_t delay_ms, std::function<void()> fn);
  void Run();
  void Accept();
  // Evicts the oldest pending inbound handshake (of `source` if given).
  void EvictOldestPending(const std::string* source);
  // True while some link could still write queued frames (see Flushable()).
  bool AnyFlushable() const;
  void CloseAll();

  Core core_;  // first: holds the io_context, destroyed last
  tcp::acceptor acceptor_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  // Every other member is the loop thread's (after Listen); the loop thread
  // itself is started and joined under shutdown_mu_ (Shutdown: any thread).
  Mutex shutdown_mu_;
  std::thread thread_ PYNENC_GUARDED_BY(shutdown_mu_);
  std::map<TimerId, std::unique_ptr<asio::steady_timer>> timers_;
  std::atomic<TimerId> next_timer_{1};
  std::uint64_t next_accept_seq_ = 0;  // loop thread only
  std::atomic<bool> stopped_{false};
};

Status AsioEnvImpl::Listen(const asio::ip::address& ip, const std::string& host) {
  const tcp::endpoint ep(ip, core_.options.port);
  const std::string where = FormatAddress(host, core_.options.port);
  boost::system::error_code ec;
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (ec == asio::error::address_in_use) {
    return Status::BackendFailure("address already in use: " + where);
  }
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::BackendFailure("cannot listen on " + where + ": " + ec.message());
  const std::uint16_t port = acceptor_.local_endpoint(ec).port();
  if (ec) return Status::BackendFailure("cannot read the bound port: " + ec.message());
  const std::string& adv =
      core_.options.advertise_host.empty() ? host : core_.options.advertise_host;
  core_.local_address = FormatAddress(adv, port);
  Accept();
  return Status::Ok();
}

void AsioEnvImpl::Run() {
  while (true) {
    try {
      core_.io.run();
      return;
    } catch (const std::exception& e) {
      core_.Log(LogLevel::kError, std::string("loop handler threw: ") + e.what());
    } catch (...) {
      core_.Log(LogLevel::kError, "loop handler threw a non-std exception");
    }
  }
}

void AsioEnvImpl::Accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (core_.closing || !acceptor_.is_open()) return;
    if (ec) {
      // E.g. out of file descriptors: retry shortly instead of spinning.
      core_.Log(LogLevel::kWarning, "accept failed: " + ec.message());
      After(100, [this] {
        if (!core_.closing) Accept();
      });
      return;
    }
    auto conn = std::make_shared<InboundConn>(core_, std::move(socket), next_accept_seq_++);
    // Full (globally, or for this source): the oldest pending handshake goes,
    // not the new one. Idle sockets held open by a flood are then always the
    // ones closed, and a peer's handshake, done within a round trip, gets in.
    if (core_.pending_by_source[conn->source()] >= core_.options.max_pending_handshakes_per_source) {
      EvictOldestPending(&conn->source());
    }
    if (core_.pending_handshakes >= core_.options.max_pending_handshakes) {
      EvictOldestPending(nullptr);
    }
    ++core_.pending_handshakes;
    ++core_.pending_by_source[conn->source()];
    core_.inbound.insert(conn);
    conn->Start();
    Accept();
  });
}

void AsioEnvImpl::EvictOldestPending(const std::string* source) {
  std::shared_ptr<InboundConn> oldest;
  for (const auto& c : core_.inbound) {
    if (!c->pending() || (source != nullptr && c->source() != *source)) continue;
    if (!oldest || c->accept_seq() < oldest->accept_seq()) oldest = c;
  }
  if (oldest) {
    oldest->Evict(source != nullptr ? "evicted: too many handshakes in progress from its address"
                                    : "evicted: too many handshakes in progress");
  }
}

Env::TimerId AsioEnvImpl::After(std::int64_t delay_ms, std::function<void()> fn) {
  const TimerId id = next_timer_.fetch_add(1);
  if (OnLoop()) {
    StartTimer(id, delay_ms, std::move(fn));
  } else {
    asio::post(core_.io, [this, id, delay_ms, fn = std::move(fn)]() mutable {
      if (!core_.closing) StartTimer(id, delay_ms, std::move(fn));
    });
  }
  return id;
}

void AsioEnvImpl::StartTimer(TimerId id, std::int64_t delay_ms, std::function<void()> fn) {
  auto timer = std::make_unique<asio::steady_timer>(core_.io);
  timer->expires_after(std::chrono::milliseconds(std::max<std::int64_t>(0, delay_ms)));
  timer->async_wait([this, id, fn = std::move(fn)](const boost::system::error_code& ec) {
    // A timer cancelled after it expired still completes without an error: the
    // map entry is what says whether it is live.
    const auto it = timers_.find(id);
    if (ec || it == timers_.end()) return;
    timers_.erase(it);
    try {
      fn();
    } catch (const std::exception& e) {
      core_.Log(LogLevel::kError, std::string("timer callback threw: ") + e.what());
    } catch (...) {
      core_.Log(LogLevel::kError, "timer callback threw a non-std exception");
    }
  });
  timers_.emplace(id, std::move(timer));
}

void AsioEnvImpl::Cancel(TimerId id) {
  if (!OnLoop()) {
    asio::post(core_.io, [this, id] { Cancel(id); });
    return;
  }
  const auto it = timers_.find(id);
  if (it == timers_.end()) return;
  it->second->cancel();
  timers_.erase(it);
}

void AsioEnvImpl::SetReceiver(Receiver receiver) {
  if (OnLoop()) {
    core_.receiver = std::move(receiver);
  } else {
    asio::post(core_.io,
               [this, r = std::move(receiver)]() mutable { core_.receiver = std::move(r); });
  }
}

void AsioEnvImpl::Send(const Address& to, std::uint8_t type, std::string payload) {
  if (!OnLoop()) {
    asio::post(core_.io, [this, to, type, payload = std::move(payload)]() mutable {
      Send(to, type, std::move(payload));
    });
    return;
  }
  if (core_.closing) {
    AtomicStats::Add(core_.stats.frames_dropped);
    return;
  }
  if (type < kFirstProtocolType) {
    AtomicStats::Add(core_.stats.frames_dropped);
    core_.Log(LogLevel::kError, "Send with transport-internal type " + std::to_string(type));
    return;
  }
  if (payload.size() > core_.options.max_frame_bytes) {
    AtomicStats::Add(core_.stats.sends_oversize);
    core_.Log(LogLevel::kWarning, "dropped a frame of " + std::to_string(payload.size()) +
                                      " bytes to " + to + ": over max_frame_bytes " +
                                      std::to_string(core_.options.max_frame_bytes));
    return;
  }
  if (to == core_.local_address) {
    // To ourselves: through the loop (never re-entrantly), no socket.
    asio::post(core_.io, [this, type, payload = std::move(payload)]() mutable {
      if (core_.closing) return;
      AtomicStats::Add(core_.stats.frames_local);
      core_.Deliver(core_.local_address, type, std::move(payload));
    });
    return;
  }
  auto it = core_.outbound.find(to);
  if (it == core_.outbound.end()) {
    auto target = ParseAddress(to);
    if (!target.ok()) {
      AtomicStats::Add(core_.stats.frames_dropped);
      core_.Log(LogLevel::kError, "Send: " + target.status().message());
      return;
    }
    it =
        core_.outbound.emplace(to, std::make_shared<OutboundLink>(core_, to, target.value())).first;
  }
  it->second->Enqueue(PrepareRecord(type, payload), type);
}

void AsioEnvImpl::Post(std::function<void()> fn) {
  if (stopped_.load()) return;
  asio::post(core_.io, [this, fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      core_.Log(LogLevel::kError, std::string("posted function threw: ") + e.what());
    } catch (...) {
      core_.Log(LogLevel::kError, "posted function threw a non-std exception");
    }
  });
}

bool AsioEnvImpl::AnyFlushable() const {
  for (const auto& [addr, link] : core_.outbound) {
    if (link->Flushable()) return true;
  }
  return false;
}

void AsioEnvImpl::CloseAll() {
  core_.closing = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (auto& [addr, link] : core_.outbound) link->Close();
  core_.outbound.clear();
  // Close() erases from the set: iterate over a copy.
  auto inbound = core_.inbound;
  for (const auto& conn : inbound) conn->Close();
  for (auto& [id, timer] : timers_) timer->cancel();
  timers_.clear();
}

void AsioEnvImpl::Shutdown(std::int64_t flush_ms) {
  MutexLock lock(shutdown_mu_);
  if (stopped_.load()) return;
  if (thread_.joinable() && std::this_thread::get_id() == thread_.get_id()) {
    core_.Log(LogLevel::kError, "Shutdown called on the loop thread: ignored");
    return;
  }
  if (thread_.joinable()) {
    // Stop accepting and stop delivering; queued outbound frames keep flowing.
    asio::post(core_.io, [this] {
      core_.closing = true;
      boost::system::error_code ignored;
      acceptor_.close(ignored);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(flush_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      auto done = std::make_shared<std::promise<bool>>();
      auto answer = done->get_future();
      asio::post(core_.io, [this, done] { done->set_value(AnyFlushable()); });
      if (answer.wait_until(deadline) != std::future_status::ready || !answer.get()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    asio::post(core_.io, [this] {
      CloseAll();
      work_.reset();
      core_.io.stop();
    });
    thread_.join();
  }
  stopped_.store(true);
  // The loop is gone (or never ran): whatever is left is ours to close here.
  CloseAll();
  work_.reset();
}

}  // namespace pynenc_cpp::cluster::transport

namespace pynenc_cpp::cluster {

using transport::AsioEnvImpl;
using transport::IsLoopbackHost;
using transport::kMaxAddressBytes;
using transport::kMaxClusterNameBytes;
using transport::tcp;
namespace asio = boost::asio;

Result<std::unique_ptr<AsioEnv>> MakeAsioEnv(const TransportOptions& options, LogSink log_sink) {
  if (options.cluster_name.empty() || options.cluster_name.size() > kMaxClusterNameBytes) {
    return Status::BadConfig("cluster_name must be 1-255 bytes");
  }
  if (options.max_frame_bytes == 0 || options.max_frame_bytes > (1u << 30)) {
    return Status::BadConfig("max_frame_bytes must be 1 B - 1 GiB");
  }
  if (options.send_queue_bound == 0) return Status::BadConfig("send_queue_bound must be > 0");
  if (options.outbound_expiry_ms <= 0 || options.outbound_expiry_ms > 86'400'000) {
    return Status::BadConfig("outbound_expiry_ms must be 1 ms - 1 day");
  }
  if (options.reconnect_initial_ms <= 0 ||
      options.reconnect_max_ms < options.reconnect_initial_ms) {
    return Status::BadConfig("need 0 < reconnect_initial_ms <= reconnect_max_ms");
  }
  if (options.handshake_timeout_ms <= 0) {
    return Status::BadConfig("handshake_timeout_ms must be > 0");
  }
  if (options.max_pending_handshakes == 0 || options.max_pending_handshakes_per_source == 0) {
    return Status::BadConfig("max_pending_handshakes and max_pending_handshakes_per_source must be > 0");
  }
  if (options.refusal_logs_per_second < 1) {
    return Status::BadConfig("refusal_logs_per_second must be >= 1");
  }
  if (options.host.empty()) return Status::BadConfig("host is empty");
  if (options.host.size() > kMaxAddressBytes - 6 ||
      options.advertise_host.size() > kMaxAddressBytes - 6) {
    return Status::BadConfig("host too long");
  }
  if (options.secret.empty()) {
    return Status::BadConfig("a secret is required (there is no empty key, on loopback either)");
  }
  try {
    asio::ip::address ip;
    boost::system::error_code ec;
    if (options.host == "localhost") {
      ip = asio::ip::address_v4::loopback();
    } else {
      ip = asio::ip::make_address(options.host, ec);
      if (ec) {
        asio::io_context io;
        tcp::resolver resolver(io);
        const auto results = resolver.resolve(options.host, "0", ec);
        if (ec || results.empty()) {
          return Status::BadConfig("cannot resolve host '" + options.host + "'");
        }
        ip = results.begin()->endpoint().address();
      }
    }
    auto env = std::make_unique<AsioEnvImpl>(options, std::move(log_sink));
    if (Status s = env->Listen(ip, options.host); !s.ok()) return s;
    env->StartLoop();
    return std::unique_ptr<AsioEnv>(std::move(env));
  } catch (const std::exception& e) {
    return Status::BackendFailure(std::string("cannot start the transport: ") + e.what());
  }
}

}  // namespace pynenc_cpp::cluster
