#include "redis/redis_keys.h"

#include <stdexcept>

namespace pynenc_cpp::redis {
namespace {

struct KeyName {
  std::string_view lua;
  std::string_view text;
};

#define PYNENC_CPP_REDIS_KEY_ENTRY(constant, lua, text) KeyName{#lua, text},
constexpr KeyName kKeyNames[] = {PYNENC_CPP_REDIS_KEY_NAMES(PYNENC_CPP_REDIS_KEY_ENTRY)};
#undef PYNENC_CPP_REDIS_KEY_ENTRY

constexpr bool NamesAreDistinct() {
  for (const KeyName& a : kKeyNames) {
    int same = 0;
    for (const KeyName& b : kKeyNames) same += (a.lua == b.lua) + (a.text == b.text);
    if (same != 2) return false;
  }
  return true;
}
static_assert(NamesAreDistinct(), "two key names share a Lua name or a text");

}  // namespace

std::string KeyPrefix(const std::string& app_id, const std::string& component) {
  return "pynenc:{" + app_id + "}:" + component + ":";
}

std::string ExpandKeyNames(std::string_view script) {
  std::string out;
  out.reserve(script.size());
  std::size_t at = 0;
  for (std::size_t open; (open = script.find("${", at)) != std::string_view::npos;) {
    const std::size_t close = script.find('}', open);
    if (close == std::string_view::npos) {
      throw std::invalid_argument("redis script: '${' without a closing '}'");
    }
    const std::string_view name = script.substr(open + 2, close - open - 2);
    const KeyName* found = nullptr;
    for (const KeyName& k : kKeyNames) {
      if (k.lua == name) found = &k;
    }
    if (found == nullptr) {
      throw std::invalid_argument("redis script: unknown key name ${" + std::string(name) + "}");
    }
    out.append(script.substr(at, open - at)).append("'").append(found->text).append("'");
    at = close + 1;
  }
  out.append(script.substr(at));
  return out;
}

std::string GlobEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace pynenc_cpp::redis
