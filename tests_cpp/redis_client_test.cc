// Redis plumbing against a real redis-server started by the test: commands,
// pipelines, scripts (NOSCRIPT reload), clear errors for an unreachable server,
// reconnecting after a restart, and fork safety.
#include "redis/redis_client.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "backend_fixture.h"
#include "reply_dropping_proxy.h"

namespace pynenc_cpp::redis {
namespace {

using pynenc_cpp::testing::RedisServer;
using pynenc_cpp::testing::ReplyDroppingProxy;

RedisOptions Local(int port) {
  RedisOptions o;
  o.port = port;
  o.connect_timeout_ms = 1000;
  return o;
}

TEST(RedisOptions, ParsesLocations) {
  auto o = ParseRedisLocation("example:6380/3?connect_timeout_ms=100&io_timeout_ms=200");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o.value().host, "example");
  EXPECT_EQ(o.value().port, 6380);
  EXPECT_EQ(o.value().db, 3);
  EXPECT_EQ(o.value().connect_timeout_ms, 100);
  EXPECT_EQ(o.value().io_timeout_ms, 200);
  EXPECT_EQ(ParseRedisLocation("h").value().port, 6379);
  for (const char* bad :
       {":6379", "h:0", "h:99999", "h:x", "h:1/x", "h:1?colour=red", "h:1?io_timeout_ms=0",
        "[::1", "[]:1", "[::1]x", "[::1]:x", "h:1?db=x", "unix://", "unix://relative.sock"}) {
    EXPECT_EQ(ParseRedisLocation(bad).status().code(), ErrorCode::kBadConfig) << bad;
  }
}

// The forms redis-py reads: IPv6 literals, a unix socket with db and password in
// the query, db as a query option.
TEST(RedisOptions, ParsesIpv6UnixSocketsAndQueryDb) {
  auto v6 = ParseRedisLocation("[::1]:6390/2");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6.value().host, "::1");
  EXPECT_EQ(v6.value().port, 6390);
  EXPECT_EQ(v6.value().db, 2);
  auto v6_default_port = ParseRedisLocation(":pw@[fe80::1]");
  ASSERT_TRUE(v6_default_port.ok());
  EXPECT_EQ(v6_default_port.value().host, "fe80::1");
  EXPECT_EQ(v6_default_port.value().port, 6379);
  EXPECT_EQ(v6_default_port.value().password, "pw");

  auto sock = ParseRedisLocation("unix://app:p%40w@/run/redis/r.sock?db=5&io_timeout_ms=300");
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  EXPECT_EQ(sock.value().unix_path, "/run/redis/r.sock");
  EXPECT_EQ(sock.value().db, 5);
  EXPECT_EQ(sock.value().username, "app");
  EXPECT_EQ(sock.value().password, "p@w");
  EXPECT_EQ(sock.value().io_timeout_ms, 300);
  auto sock_pw = ParseRedisLocation("unix:///tmp/r.sock?password=s%3Dcret");
  ASSERT_TRUE(sock_pw.ok());
  EXPECT_EQ(sock_pw.value().unix_path, "/tmp/r.sock");
  EXPECT_EQ(sock_pw.value().password, "s=cret");
  EXPECT_EQ(sock_pw.value().db, 0);

  EXPECT_EQ(ParseRedisLocation("h:1?db=7").value().db, 7);

  // As redis-py: the socket path is percent-decoded, a query value also reads '+'
  // as a space, user info keeps its '+'.
  auto spaced = ParseRedisLocation("unix://u+1:p+w@/tmp/my%20dir/r.sock");
  ASSERT_TRUE(spaced.ok()) << spaced.status().ToString();
  EXPECT_EQ(spaced.value().unix_path, "/tmp/my dir/r.sock");
  EXPECT_EQ(spaced.value().username, "u+1");
  EXPECT_EQ(spaced.value().password, "p+w");
  EXPECT_EQ(ParseRedisLocation("h?password=a+b%2Bc").value().password, "a b+c");
  EXPECT_EQ(ParseRedisLocation("unix:///tmp/x%00y").status().code(), ErrorCode::kBadConfig);
}

TEST(RedisOptions, ARedisUriNamingAUnixSocketAsItsHostIsRefused) {
  EXPECT_EQ(ParseBackendUri("redis://u:pw@unix:///tmp/r.sock").status().code(),
            ErrorCode::kBadConfig);
  EXPECT_NE(ParseBackendUri("redis://u:pw@unix:///tmp/r.sock").status().message().find(
                "unix:///path"),
            std::string::npos);
  auto parsed = ParseBackendUri("redis://unix:///tmp/r.sock");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(parsed.status().message().find("unix:///path"), std::string::npos)
      << parsed.status().message();
}

TEST(RedisOptions, RedissIsAClearErrorNamingWhatIsMissing) {
  auto parsed = ParseBackendUri("rediss://:s3cr3t@h:6380/0");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(parsed.status().message().find("no TLS"), std::string::npos)
      << parsed.status().message();
  EXPECT_EQ(parsed.status().message().find("s3cr3t"), std::string::npos);
  auto sock = ParseBackendUri("unix:///tmp/r.sock?db=1");
  ASSERT_TRUE(sock.ok());
  EXPECT_EQ(sock.value().kind, BackendKind::kRedis);
}

// A real redis-server listening only on a unix socket.
TEST(RedisClient, ConnectsThroughAUnixSocket) {
  char dir_template[] = "/tmp/pynenc-cpp-sock-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string sock = dir + "/r.sock";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", sock.c_str(),
           "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  RedisOptions o;
  auto parsed = ParseRedisLocation("unix://" + sock + "?db=4");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  o = parsed.value();
  o.connect_timeout_ms = 5000;  // the server is starting
  auto c = Client::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value()->Command({"SET", "k", "v"}).value().str, "OK");
  EXPECT_EQ(c.value()->Command({"CLIENT", "INFO"}).value().str.find("db=4") != std::string::npos,
            true);
  EXPECT_EQ(c.value()->Describe(), "unix:" + sock + "/4");
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  std::filesystem::remove_all(dir);
}

TEST(RedisClient, CommandsPipelinesAndScripts) {
  RedisServer server;
  auto c = Client::Open(Local(server.port()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Client& client = *c.value();
  EXPECT_EQ(client.Command({"SET", "k", std::string("v\0w", 3)}).value().str, "OK");
  EXPECT_EQ(client.Command({"GET", "k"}).value().str, std::string("v\0w", 3));
  EXPECT_TRUE(client.Command({"GET", "missing"}).value().is_nil());
  EXPECT_TRUE(client.Command({"NOSUCHCOMMAND"}).value().is_error());
  auto replies = client.Pipeline({{"RPUSH", "l", "a", "b"}, {"LRANGE", "l", "0", "-1"}});
  ASSERT_TRUE(replies.ok());
  EXPECT_EQ(replies.value()[0].integer, 2);
  ASSERT_EQ(replies.value()[1].elements.size(), 2u);
  EXPECT_EQ(replies.value()[1].elements[1].str, "b");

  Script incr("return redis.call('INCRBY', KEYS[1], ARGV[1])");
  EXPECT_EQ(client.Eval(incr, {"n"}, {"5"}).value().integer, 5);
  ASSERT_EQ(client.Command({"SCRIPT", "FLUSH"}).value().str, "OK");  // forces NOSCRIPT
  EXPECT_EQ(client.Eval(incr, {"n"}, {"2"}).value().integer, 7);
  EXPECT_EQ(incr.sha1().size(), 40u);
}

// A command whose reply times out may be running on the server: it must not be
// sent again (a pop or a route run twice is not the same as once). The script
// below keeps the server busy for 400 ms, then increments: the client's 200 ms
// read timeout fires while it runs, and it runs to the end regardless.
TEST(RedisClient, ACommandThatTimedOutIsNeverSentAgain) {
  RedisServer server;
  RedisOptions o = Local(server.port());
  o.io_timeout_ms = 200;
  auto c = Client::Open(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Client& client = *c.value();
  ASSERT_EQ(client.Command({"SET", "n", "0"}).value().str, "OK");  // pools a connection
  const std::string slow_incr =
      "local t = redis.call('TIME') local t0 = t[1] * 1000000 + t[2] "
      "repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - t0 > 400000 "
      "return redis.call('INCR', KEYS[1])";
  auto r = client.Command({"EVAL", slow_incr, "1", "n"});
  ASSERT_FALSE(r.ok()) << "the reply comes after the read timeout";
  EXPECT_EQ(r.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(r.status().message().find("may or may not have been applied"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(r.status().connection_lost());  // the adapters may retry it later
  EXPECT_TRUE(r.status().maybe_applied());    // it was sent (and here it ran)
  // The script that was sent ran once; a retry would have run it a second time.
  auto admin = Client::Open(Local(server.port()));
  ASSERT_TRUE(admin.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(900));  // both would have finished
  EXPECT_EQ(admin.value()->Command({"GET", "n"}).value().str, "1");
  // The client still works afterwards.
  EXPECT_EQ(client.Command({"INCR", "n"}).value().integer, 2);
}

// The server applied the command and the reply was lost with the connection (it
// looks just like a connection the server closed while idle): the command is not
// sent again, and the error says it may have been applied.
TEST(RedisClient, ACommandWhoseReplyWasLostIsNeverSentAgain) {
  RedisServer server;
  ReplyDroppingProxy proxy(server.port());
  auto c = Client::Open(Local(proxy.port()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Client& client = *c.value();
  ASSERT_EQ(client.Command({"SET", "n", "0"}).value().str, "OK");  // pools a connection
  proxy.DropNextReply();
  auto r = client.Command({"INCR", "n"});
  ASSERT_FALSE(r.ok()) << "the reply never came";
  EXPECT_TRUE(r.status().connection_lost());
  EXPECT_TRUE(r.status().maybe_applied());
  EXPECT_NE(r.status().message().find("may or may not have been applied"), std::string::npos)
      << r.status().message();
  auto admin = Client::Open(Local(server.port()));
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(admin.value()->Command({"GET", "n"}).value().str, "1");  // ran once
  EXPECT_EQ(client.Command({"INCR", "n"}).value().integer, 2);  // and the client goes on
}

// A pooled connection the server closed while it sat idle is found before a
// command is sent on it: the command goes out on a fresh connection, no error.
TEST(RedisClient, APooledConnectionClosedWhileIdleIsReplacedBeforeSending) {
  RedisServer server;
  auto c = Client::Open(Local(server.port()));
  ASSERT_TRUE(c.ok());
  Client& client = *c.value();
  // The server closes the connection after this reply (a client killing itself);
  // the connection goes back to the pool first.
  const long long id = client.Command({"CLIENT", "ID"}).value().integer;
  ASSERT_EQ(
      client.Command({"CLIENT", "KILL", "ID", std::to_string(id), "SKIPME", "no"}).value().integer,
      1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the FIN arrives
  auto r = client.Command({"INCR", "k"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value().integer, 1);
}

// A server with requirepass and an ACL user: URIs with a password and with a
// user and password connect; a wrong one is a clear error that never shows it.
TEST(RedisClient, PasswordsAndAclUsersFromTheUri) {
  RedisServer server;
  const std::string at = "127.0.0.1:" + std::to_string(server.port());
  {
    auto admin = Client::Open(Local(server.port()));
    ASSERT_TRUE(admin.ok());
    ASSERT_EQ(admin.value()
                  ->Command({"ACL", "SETUSER", "app", "on", ">app/p@w", "~*", "&*", "+@all"})
                  .value()
                  .str,
              "OK");
    ASSERT_EQ(admin.value()->Command({"CONFIG", "SET", "requirepass", "s3cr3t"}).value().str,
              "OK");
  }
  for (const std::string& loc : {":s3cr3t@" + at + "/0", "app:app%2Fp%40w@" + at + "/1",
                                 at + "/2?password=s3cr3t"}) {
    auto o = ParseRedisLocation(loc);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    auto c = Client::Open(o.value());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c.value()->Command({"PING"}).value().str, "PONG");
  }
  for (const std::string& loc : {":wr0ng-pw@" + at + "/3", "app:wr0ng-pw@" + at + "/3"}) {
    auto o = ParseRedisLocation(loc);
    ASSERT_TRUE(o.ok());
    o.value().connect_timeout_ms = 300;
    auto c = Client::Open(o.value());
    ASSERT_FALSE(c.ok()) << loc;
    EXPECT_EQ(c.status().message().find("wr0ng-pw"), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(at), std::string::npos) << c.status().message();
  }
}

TEST(RedisClient, UnreachableServerIsAClearErrorWithinTheTimeout) {
  const int port = RedisServer::FreePort();  // nothing listens there
  RedisOptions o = Local(port);
  o.connect_timeout_ms = 300;
  const auto start = std::chrono::steady_clock::now();
  auto c = Client::Open(o);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(c.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("refused"), std::string::npos) << c.status().message();
  EXPECT_TRUE(c.status().connection_lost());
  EXPECT_FALSE(c.status().maybe_applied());  // never reached a server
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(RedisClient, ReconnectsAfterTheServerRestarts) {
  RedisServer server(/*appendonly=*/true);
  auto c = Client::Open(Local(server.port()));
  ASSERT_TRUE(c.ok());
  Client& client = *c.value();
  ASSERT_EQ(client.Command({"SET", "survives", "yes"}).value().str, "OK");
  server.Stop();
  auto down = client.Command({"GET", "survives"});
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), ErrorCode::kBackendFailure);
  EXPECT_TRUE(down.status().connection_lost());
  EXPECT_FALSE(down.status().maybe_applied());  // the pooled socket was dead: not sent
  // A reply the server did send, even an error, is not a lost connection.
  server.Start();
  auto wrong = client.Command({"NO-SUCH-COMMAND"});
  ASSERT_TRUE(wrong.ok());
  EXPECT_TRUE(wrong.value().is_error());
  auto back = client.Command({"GET", "survives"});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back.value().str, "yes");  // appendonly: acknowledged writes survive
}

TEST(RedisClient, BlockingCommandWaitsServerSide) {
  RedisServer server;
  auto c = Client::Open(Local(server.port()));
  ASSERT_TRUE(c.ok());
  auto empty = c.value()->BlockingCommand({"BLPOP", "nothing", "0.2"}, 200);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty.value().is_nil());
  std::thread pusher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (void)c.value()->Command({"RPUSH", "work", "job"});
  });
  auto got = c.value()->BlockingCommand({"BLPOP", "work", "5"}, 5000);
  pusher.join();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got.value().elements.size(), 2u);
  EXPECT_EQ(got.value().elements[1].str, "job");
}

TEST(RedisClient, ForkedChildUsesItsOwnConnections) {
  RedisServer server;
  auto c = Client::Open(Local(server.port()));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.value()->Command({"SET", "parent", "1"}).ok());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto r = c.value()->Command({"INCR", "child"});
    _exit(r.ok() && r.value().integer == 1 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The parent's pooled connection still works after the child exited.
  EXPECT_EQ(c.value()->Command({"GET", "child"}).value().str, "1");
}

TEST(RedisKeys, PrefixIsPerAppAndComponentInOneClusterSlot) {
  EXPECT_EQ(KeyPrefix("shop", "broker"), "pynenc:{shop}:broker:");
  EXPECT_NE(KeyPrefix("a", "broker"), KeyPrefix("b", "broker"));
}

}  // namespace
}  // namespace pynenc_cpp::redis
