// The names of pynenc-cpp's Redis keys: every key of one app's component starts
// with KeyPrefix(app_id, component), and a script gets either that prefix (ARGV[1]
// or KEYS[1]) to append its keys' own names to, or the whole keys in KEYS.
#pragma once

#include <string>

namespace pynenc_cpp::redis {

// The key prefix of one component of one app: "pynenc:{app_id}:{component}:".
// The braces make every key of an app hash to one Redis Cluster slot.
std::string KeyPrefix(const std::string& app_id, const std::string& component);

// `s` with the glob metacharacters of SCAN MATCH escaped, so it matches itself.
std::string GlobEscape(const std::string& s);

// The SCAN MATCH pattern of every key that starts with `prefix`.
inline std::string MatchPrefix(const std::string& prefix) { return GlobEscape(prefix) + "*"; }

}  // namespace pynenc_cpp::redis
