// Storage (ports/storage.h), on every backend: one object per (URI, app id) that
// keeps one port of each kind, shares its pool, database or memory between them
// and the Lifecycle it builds, and shares nothing with another Storage but what
// the server or file holds; bad configs are errors.
#include "pynenc_cpp/ports/storage.h"

#include <gtest/gtest.h>

#include "backend_fixture.h"

namespace pynenc_cpp {
namespace {

using testing::BackendNames;
using testing::RedisServer;

const TriggerContextNames kNames{"ctx.Status", "ctx.Result", "ctx.Exception"};

template <typename B>
class StorageTest : public testing::BackendTest<B> {
 protected:
  std::shared_ptr<Storage> Open(const std::string& app_id = "compliance-app") {
    auto r = Storage::Open(this->backend_.Config(nullptr, app_id));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : nullptr;
  }
  static constexpr bool kShared = !std::is_same_v<B, testing::MemBackend>;
};
TYPED_TEST_SUITE(StorageTest, testing::AllBackends, BackendNames);

template <typename T>
std::shared_ptr<T> Got(Result<std::shared_ptr<T>> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : nullptr;
}

TYPED_TEST(StorageTest, EachPortIsMadeOnceAndKept) {
  auto storage = this->Open();
  ASSERT_NE(storage, nullptr);
  auto broker = Got(storage->broker());
  auto state = Got(storage->state_backend());
  auto orchestrator = Got(storage->orchestrator());
  auto trigger = Got(storage->trigger_store());
  auto data = Got(storage->client_data_store());
  ASSERT_TRUE(broker && state && orchestrator && trigger && data);
  EXPECT_EQ(Got(storage->broker()), broker);
  EXPECT_EQ(Got(storage->state_backend()), state);
  EXPECT_EQ(Got(storage->orchestrator()), orchestrator);
  EXPECT_EQ(Got(storage->trigger_store()), trigger);
  EXPECT_EQ(Got(storage->client_data_store()), data);
  // A New* port is another object over the same storage.
  auto fresh = storage->NewBroker();
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_NE(fresh.value().get(), broker.get());
  EXPECT_EQ(storage->config().app_id, "compliance-app");
}

TYPED_TEST(StorageTest, PortsOfOneStorageSeeOneStoreAndOthersOnlyWhatTheServerHolds) {
  auto storage = this->Open();
  ASSERT_NE(storage, nullptr);
  auto broker = Got(storage->broker());
  ASSERT_NE(broker, nullptr);
  ASSERT_TRUE(broker->Route({InvocationId("inv-1"), InvocationId("inv-2")}, "q", 0).ok());
  // The broker the same storage hands out again sees both.
  EXPECT_EQ(Got(storage->broker())->Count({"q"}).value(), 2);
  // A second storage of the same URI and app: the same data on a server or file,
  // a world of its own on memory://.
  auto other = this->Open();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(Got(other->broker())->Count({"q"}).value(), TestFixture::kShared ? 2 : 0);
  // Another app on the same URI sees none of it.
  auto app_b = this->Open("other-app");
  ASSERT_NE(app_b, nullptr);
  EXPECT_EQ(Got(app_b->broker())->Count({"q"}).value(), 0);
  // Open<Port> gives a port over a storage of its own.
  auto own = OpenBroker(this->backend_.Config());
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own.value()->Count({"q"}).value(), TestFixture::kShared ? 2 : 0);
}

TYPED_TEST(StorageTest, LifecycleWorksOnTheStoragesOwnPorts) {
  auto storage = this->Open();
  ASSERT_NE(storage, nullptr);
  auto lifecycle = storage->NewLifecycle(/*with_trigger=*/true, kNames);
  ASSERT_TRUE(lifecycle.ok()) << lifecycle.status().ToString();
  auto without_trigger = storage->NewLifecycle(/*with_trigger=*/false, kNames);
  ASSERT_TRUE(without_trigger.ok()) << without_trigger.status().ToString();
  InvocationRecord inv;
  inv.invocation_id = InvocationId("inv-life");
  inv.call_id = CallId("mod.task#args");
  inv.task_id = TaskId("mod.task");
  inv.arguments_id = "args";
  inv.serialized_arguments = "{}";
  auto routed = lifecycle.value()->RegisterAndRoute({NewRoutedInvocation{inv, "q", 0}},
                                                    Actor{std::nullopt, "ctx"});
  ASSERT_TRUE(routed.ok()) << routed.status().ToString();
  // What the composite wrote is what the storage's own ports read.
  EXPECT_EQ(Got(storage->broker())->Count({"q"}).value(), 1);
  auto record = Got(storage->orchestrator())->GetStatusRecord(InvocationId("inv-life"));
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record.value().status, InvocationStatus::kRegistered);
  EXPECT_TRUE(Got(storage->state_backend())->GetInvocation(InvocationId("inv-life")).ok());
  // Parts missing a required port are refused.
  LifecycleParts parts;
  parts.broker = Got(storage->broker());
  auto refused = storage->NewLifecycle(std::move(parts), kNames);
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
}

TEST(StorageOpen, BadConfigsAndUnreachableServersAreErrors) {
  for (const char* uri : {"", "memory", "ftp://host", "sqlite://", "redis://"}) {
    auto r = Storage::Open(BackendConfig{uri, "app", nullptr});
    EXPECT_EQ(r.status().code(), ErrorCode::kBadConfig) << uri;
  }
  EXPECT_EQ(Storage::Open(BackendConfig{"memory://", "", nullptr}).status().code(),
            ErrorCode::kBadConfig);
  const std::string closed = "127.0.0.1:" + std::to_string(RedisServer::FreePort());
  auto unreachable =
      Storage::Open(BackendConfig{"redis://" + closed + "/0?connect_timeout_ms=200", "a", nullptr});
  EXPECT_EQ(unreachable.status().code(), ErrorCode::kBackendFailure);
  EXPECT_NE(unreachable.status().message().find(closed), std::string::npos);
  auto memory = Storage::Open(BackendConfig{"memory://", "app", nullptr});
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory.value()->kind(), BackendKind::kMemory);
}

}  // namespace
}  // namespace pynenc_cpp
