#include "redis/redis_keys.h"

namespace pynenc_cpp::redis {

std::string KeyPrefix(const std::string& app_id, const std::string& component) {
  return "pynenc:{" + app_id + "}:" + component + ":";
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
