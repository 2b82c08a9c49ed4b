// The Redis key layout module: the names a script spells ${name} become the
// same text C++ spells keys::kName, a name the layout lacks is refused when the
// script is built, and a script run on a real server writes the key C++ reads.
#include "redis/redis_keys.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "backend_fixture.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis {
namespace {

TEST(RedisKeys, ExpandsEachNameToItsQuotedText) {
  EXPECT_EQ(ExpandKeyNames("local k = P .. ${inv} .. id"), "local k = P .. 'inv:' .. id");
  EXPECT_EQ(ExpandKeyNames("${results}${seq}"), "'results''seq'");
  EXPECT_EQ(ExpandKeyNames("${exec_running} or ${execs}"), "'exec_running' or 'execs'");
  EXPECT_EQ(ExpandKeyNames("x = ${q}"), std::string("x = '") + keys::kQ + "'");
}

TEST(RedisKeys, LeavesAScriptWithoutNamesAsItIs) {
  const std::string lua = "local t = {} return redis.call('GET', KEYS[1]) .. '$' .. '{'";
  EXPECT_EQ(ExpandKeyNames(lua), lua);
  EXPECT_EQ(ExpandKeyNames(""), "");
}

TEST(RedisKeys, RefusesANameTheLayoutLacks) {
  try {
    ExpandKeyNames("return P .. ${nope} .. id");
    FAIL() << "expanded an unknown name";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("${nope}"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ExpandKeyNames("return P .. ${inv .. id"), std::invalid_argument);
  EXPECT_THROW(ExpandKeyNames("${}"), std::invalid_argument);
}

TEST(RedisKeys, EveryConstantIsItsLuaName) {
#define PYNENC_CPP_CHECK(constant, lua, text)                                        \
  EXPECT_EQ(ExpandKeyNames("${" #lua "}"), std::string("'") + keys::constant + "'"); \
  EXPECT_EQ(std::string(keys::constant), text);
  PYNENC_CPP_REDIS_KEY_NAMES(PYNENC_CPP_CHECK)
#undef PYNENC_CPP_CHECK
}

TEST(RedisKeys, AScriptAndCxxNameTheSameKeyOnAServer) {
  pynenc_cpp::testing::RedisServer server;
  RedisOptions o;
  o.port = server.port();
  auto client = Client::Open(o);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::string p = KeyPrefix("app", keys::kOrchestrator);
  const Script script("redis.call('HSET', ARGV[1] .. ${inv} .. ARGV[2], 'st', 'running')");
  auto r = client.value()->Eval(script, {}, {p, "id-1"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r.value().is_error()) << r.value().str;
  auto got = client.value()->Command({"HGET", p + keys::kInv + "id-1", "st"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value().str, "running");
  EXPECT_EQ(p + keys::kInv + "id-1", "pynenc:{app}:orchestrator:inv:id-1");
}

}  // namespace
}  // namespace pynenc_cpp::redis
