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
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
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
  explicit RedisServer(bool appendonly = false) : appendonly_(appendonly) {
    std::string pattern = (std::filesystem::temp_directory_path() / "pynenc-redis-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    port_ = FreePort();
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

  // Starts the server on the same port and dir (after Stop), waiting until it accepts.
  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      std::vector<std::string> args = {"redis-server",
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
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Accepts()) return;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        ADD_FAILURE() << "redis-server exited (is Debian's redis-server installed?)";
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "redis-server did not accept connections on port " << port_;
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
  bool Accepts() const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (ok) {  // accepting is not enough: a server loading its AOF answers LOADING
      const char ping[] = "PING\r\n";
      char reply[64] = {};
      ok = write(fd, ping, sizeof(ping) - 1) == static_cast<ssize_t>(sizeof(ping) - 1) &&
           read(fd, reply, sizeof(reply) - 1) > 0 && std::string(reply).rfind("+PONG", 0) == 0;
    }
    close(fd);
    return ok;
  }

  bool appendonly_;
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
