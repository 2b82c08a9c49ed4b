// core/call_ids.h: pynenc's args_id and invocation ids made natively. The digests
// below were computed with pynenc 0.4.0's own compute_args_id (pynenc.call);
// tests_py/test_submit_shortcuts.py compares the two on random texts as well.
#include "pynenc_cpp/core/call_ids.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace pynenc_cpp {
namespace {

TEST(ArgsId, NoArgumentsIsNoArgs) { EXPECT_EQ(ArgsId({}), "no_args"); }

TEST(ArgsId, MatchesPynencsDigests) {
  EXPECT_EQ(ArgsId({{"x", "5"}}),
            "8fff9bfc30049e3fbed8e19646350b1c0aa0b3e7500c867abd0717fb4a04aefd");
  // names in sorted order, whatever order they come in
  EXPECT_EQ(ArgsId({{"b", "2"}, {"a", "1"}}),
            "1e5ef12f60039e169e9e08116b63519f6519aea7b31d4ef842e42deba3b13cce");
  EXPECT_EQ(ArgsId({{"q", "say \"hi\"\\n"}}),
            "0e66aff8abd7083f9ab3341c8fa487ed047cba0bc3ad82e222e2d9bbf495d76c");
  EXPECT_EQ(ArgsId({{"c", std::string("\x00\x1f\t\n\r\b\f\x7f", 8)}}),
            "6ffa42cb6ba2298f707a48c668de6c336395e7ef0841ca5689006099e5fd1623");
  EXPECT_EQ(ArgsId({{"\xc3\xa9", "\xe2\x82\xac\xf0\x9f\x98\x80"}}),  // é: €😀
            "b19d70c27deb31d624840e2a493b27f1b3283edcb1ed8c5491be41a671e516ee");
  EXPECT_EQ(ArgsId({{"z", ""}, {"", "z"}}),
            "c1c1e57c6e7c2b84a48ac48db5c0821f6ea58fb420d459fa7aad0977f93356d3");
}

TEST(JsonStringOf, EscapesAsJsonDumpsWithoutAsciiOnly) {
  EXPECT_EQ(JsonStringOf(std::string("\x00\x1f\t\n\r\b\f\x7f\"\\\xc3\xa9", 12)),
            "\"\\u0000\\u001f\\t\\n\\r\\b\\f\x7f\\\"\\\\\xc3\xa9\"");
  EXPECT_EQ(JsonStringOf(""), "\"\"");
}

TEST(NewInvocationId, IsUuid4TextAndUnique) {
  // str(uuid.uuid4())'s form: 8-4-4-4-12 lowercase hex, version 4, RFC 4122 variant.
  auto uuid4_text = [](const std::string& s) {
    if (s.size() != 36) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
      const bool hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
      if (dash ? s[i] != '-' : !hex) return false;
    }
    return s[14] == '4' && (s[19] == '8' || s[19] == '9' || s[19] == 'a' || s[19] == 'b');
  };
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    Result<std::string> id = NewInvocationId();
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_TRUE(uuid4_text(id.value())) << id.value();
    seen.insert(id.value());
  }
  EXPECT_EQ(seen.size(), 10000u);
}

}  // namespace
}  // namespace pynenc_cpp
