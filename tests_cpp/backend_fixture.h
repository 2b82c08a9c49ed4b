// Backends for the typed compliance suites: each gives a BackendConfig for a
// fresh, empty store. A suite written once as TYPED_TEST over `AllBackends`
// runs against every backend; a new backend is done when the suites pass.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pynenc_cpp/core/clock.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp::testing {

struct MemBackend {
  static constexpr const char* kName = "Mem";
  BackendConfig Config(std::shared_ptr<Clock> clock = nullptr,
                       const std::string& app_id = "compliance-app") const {
    return BackendConfig{"memory://", app_id, std::move(clock)};
  }
};

// A temporary directory holding one database file, removed afterwards.
class SqliteBackend {
 public:
  static constexpr const char* kName = "Sqlite";
  SqliteBackend() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pynenc-cpp-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    EXPECT_FALSE(dir_.empty());
  }
  ~SqliteBackend() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  SqliteBackend(const SqliteBackend&) = delete;
  SqliteBackend& operator=(const SqliteBackend&) = delete;

  std::string Path() const { return dir_ + "/compliance.db"; }
  BackendConfig Config(std::shared_ptr<Clock> clock = nullptr,
                       const std::string& app_id = "compliance-app") const {
    return BackendConfig{"sqlite://" + Path(), app_id, std::move(clock)};
  }

 private:
  std::string dir_;
};

// A private redis-server (Debian's binary) on a free loopback port, with its
// data dir in a temp dir; stopped and removed afterwards. Never a server that
// happens to be running.
class RedisServer {
 public:
  explicit RedisServer(bool appendonly = false) : RedisServer(appendonly, {}, "") {}
  // `extra` are more "--option value" arguments (e.g. {"--replicaof", "127.0.0.1",
  // "6379"}). A non-empty `sentinel_conf` starts a sentinel (redis-server --sentinel)
  // with that config file's text instead of a data server.
  RedisServer(bool appendonly, std::vector<std::string> extra, std::string sentinel_conf)
      : appendonly_(appendonly),
        extra_(std::move(extra)),
        sentinel_conf_(std::move(sentinel_conf)) {
    std::string pattern = (std::filesystem::temp_directory_path() / "pynenc-redis-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    port_ = FreePort();
    if (!sentinel_conf_.empty()) {
      std::ofstream(dir_ + "/sentinel.conf") << sentinel_conf_;
    }
    Start();
  }
  ~RedisServer() {
    Stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

  // Starts the server on the same port and dir (after Stop), waiting until it
  // accepts. The first start takes another free port when its port was taken
  // meanwhile (ctest runs tests in parallel, each with a server of its own).
  void Start() {
    bool done = false;
    for (int attempt = 0; attempt < 5 && !done; ++attempt) {
      done = Launch() || started_once_;
      if (!done) port_ = FreePort();
    }
    if (!done) {
      ADD_FAILURE() << "redis-server exited at once 5 times (is Debian's redis-server installed?)";
    }
    started_once_ = true;
  }
  // Stops the server (SIGTERM: it writes its AOF) and waits for it.
  void Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  static int FreePort() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
  }

 private:
  // Forks and execs redis-server on port_. True once this server (not another
  // test's on the same port) answers, or after reporting a failure; false when
  // it exited at once, its port taken.
  bool Launch() {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      std::vector<std::string> args = {"redis-server"};
      if (!sentinel_conf_.empty()) {
        args = {"redis-server", dir_ + "/sentinel.conf", "--sentinel", "--port", port, "--bind",
                "127.0.0.1", "--dir", dir_, "--logfile", dir_ + "/redis.log", "--daemonize", "no"};
      } else {
        args = {"redis-server",
                                       "--port",
                                       port,
                                       "--bind",
                                       "127.0.0.1",
                                       "--dir",
                                       dir_,
                                       "--save",
                                       "",
                                       "--appendonly",
                                       appendonly_ ? "yes" : "no",
                                       "--logfile",
                                       dir_ + "/redis.log",
                                       "--daemonize",
                                       "no"};
      }
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        if (!started_once_) return false;  // its port was taken: another port
        ADD_FAILURE() << "redis-server exited (is Debian's redis-server installed?)";
        return true;
      }
      if (Accepts()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "redis-server did not accept connections on port " << port_;
    return true;
  }

  // True when the server on port_ is this one (its INFO names pid_) and serves:
  // accepting is not enough, a server loading its AOF answers LOADING, and another
  // test's server may hold the port.
  bool Accepts() const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    timeval timeout{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (ok) {
      const char info[] = "INFO server\r\n";
      ok = write(fd, info, sizeof(info) - 1) == static_cast<ssize_t>(sizeof(info) - 1);
      const std::string mine = "process_id:" + std::to_string(pid_) + "\r\n";
      std::string reply;
      char buf[4096];
      while (ok && reply.find(mine) == std::string::npos) {
        const std::size_t at = reply.find("\r\nprocess_id:");
        if (reply.rfind("-", 0) == 0 ||  // LOADING: not serving yet
            (at != std::string::npos && reply.find("\r\n", at + 2) != std::string::npos)) {
          ok = false;  // or another server's process id
          break;
        }
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0 || reply.size() > (std::size_t{1} << 16)) {
          ok = false;
          break;
        }
        reply.append(buf, static_cast<std::size_t>(n));
      }
    }
    close(fd);
    return ok;
  }

  bool started_once_ = false;

  bool appendonly_;
  std::vector<std::string> extra_;
  std::string sentinel_conf_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

class RedisBackend {
 public:
  static constexpr const char* kName = "Redis";
  BackendConfig Config(std::shared_ptr<Clock> clock = nullptr,
                       const std::string& app_id = "compliance-app") const {
    return BackendConfig{Uri(), app_id, std::move(clock)};
  }
  std::string Uri() const { return "redis://127.0.0.1:" + std::to_string(server_.port()) + "/0"; }
  RedisServer& server() { return server_; }

 private:
  RedisServer server_;
};

// Every backend.
using AllBackends = ::testing::Types<MemBackend, SqliteBackend, RedisBackend>;
// Backends whose data outlives the component object and is shared between
// processes: the reopen and cross-process suites run on these only.
using DurableBackends = ::testing::Types<SqliteBackend, RedisBackend>;

// Names typed-test instantiations "Mem", "Sqlite", ... in test ids.
struct BackendNames {
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};

// Base fixture: `this->backend_` of type B.
template <typename B>
class BackendTest : public ::testing::Test {
 protected:
  B backend_;
};

}  // namespace pynenc_cpp::testing
