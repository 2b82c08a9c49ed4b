// FdWatch (the thread that turns a signal's wakeup byte into a nudge of the
// runner's Wait) with real pipes: it calls its function once per readable burst,
// reads and discards the bytes, ends when the other end closes, and its
// destructor stops a thread blocked in poll.
#include "pynenc_cpp/runner/fd_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace pynenc_cpp::runner {
namespace {

using namespace std::chrono_literals;

struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { EXPECT_EQ(::pipe(fds), 0); }
  ~Pipe() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  int read_end() const { return fds[0]; }
  void Write(const char* bytes, size_t n) { ASSERT_EQ(::write(fds[1], bytes, n), ssize_t(n)); }
  void CloseWriteEnd() {
    ::close(fds[1]);
    fds[1] = -1;
  }
};

template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 5000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

TEST(FdWatch, CallsItsFunctionWhenTheFdIsReadableAndDrainsIt) {
  Pipe pipe;
  std::atomic<int> calls{0};
  auto watch = FdWatch::Start(pipe.read_end(), [&] { calls.fetch_add(1); });
  ASSERT_TRUE(watch.ok()) << watch.status().message();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), 0);  // nothing readable: it sleeps
  pipe.Write("\x0f", 1);
  ASSERT_TRUE(Eventually([&] { return calls.load() == 1; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), 1);  // the byte was read: not called again for it
  pipe.Write("\x02\x0f", 2);
  ASSERT_TRUE(Eventually([&] { return calls.load() >= 2; }));
}

TEST(FdWatch, DestructorStopsAThreadBlockedInPoll) {
  Pipe pipe;
  std::atomic<int> calls{0};
  auto watch = FdWatch::Start(pipe.read_end(), [&] { calls.fetch_add(1); });
  ASSERT_TRUE(watch.ok());
  const auto start = std::chrono::steady_clock::now();
  watch.value().reset();  // joins: would hang if the thread did not leave poll
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  pipe.Write("\x0f", 1);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), 0);  // never called after the destructor
}

TEST(FdWatch, EndsByItselfWhenTheOtherEndCloses) {
  Pipe pipe;
  std::atomic<int> calls{0};
  auto watch = FdWatch::Start(pipe.read_end(), [&] { calls.fetch_add(1); });
  ASSERT_TRUE(watch.ok());
  pipe.CloseWriteEnd();  // EOF: nothing more can come
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(calls.load(), 0);
  watch.value().reset();  // the thread already left: the join returns
}

TEST(FdWatch, RejectsABadFdOrNoFunction) {
  auto bad = FdWatch::Start(-1, [] {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  Pipe pipe;
  auto none = FdWatch::Start(pipe.read_end(), {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pynenc_cpp::runner
