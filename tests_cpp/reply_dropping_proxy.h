// A TCP proxy for Redis tests that lose a reply (shared by the client and the
// lifecycle suites).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace pynenc_cpp::testing {

// A TCP proxy in front of a server that, once armed, lets the next command
// through, takes the server's reply and closes the client's connection instead of
// passing it on: a reply lost after the server applied the command, as when the
// server is killed between an fsync and its reply.
class ReplyDroppingProxy {
 public:
  explicit ReplyDroppingProxy(int server_port) : server_port_(server_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listen_fd_, 4), 0);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ReplyDroppingProxy() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  void DropNextReply() { drop_next_ = true; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      const int upstream = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(server_port_));
      if (connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        Pump(client, upstream);
      }
      close(upstream);
      close(client);
    }
  }
  // Forwards both ways until either side closes or a reply is to be dropped.
  void Pump(int client, int upstream) {
    char buf[4096];
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t n = read(client, buf, sizeof buf);
        if (n <= 0) return;
        if (write(upstream, buf, static_cast<size_t>(n)) != n) return;
      }
      if (p[1].revents != 0) {
        const ssize_t n = read(upstream, buf, sizeof buf);
        if (n <= 0) return;
        if (drop_next_.exchange(false)) return;  // the reply is lost with the connection
        if (write(client, buf, static_cast<size_t>(n)) != n) return;
      }
    }
  }

  int server_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drop_next_{false};
  std::thread thread_;
};

}  // namespace pynenc_cpp::testing
