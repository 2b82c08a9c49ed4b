// The generation compare every fenced Redis script (fenced store, journal)
// starts with.
#pragma once

#include <string>

namespace pynenc_cpp::redis {

// Lua that reads the fields term and seq of the hash KEYS[key] and, when they
// are above the caller's {ARGV[1] = term, ARGV[2] = seq}, returns
// {0, stored term, stored seq} before the script writes anything. A stored
// value that is not a number is an error "corrupt <what> in <key name>".
inline std::string FenceLua(int key, const std::string& what) {
  const std::string k = "KEYS[" + std::to_string(key) + "]";
  return "local cur = redis.call('HMGET', " + k +
         ", 'term', 'seq')\n"
         "if cur[1] then\n"
         "  local t, s = tonumber(cur[1]), tonumber(cur[2])\n"
         "  if not t or not s then return redis.error_reply('corrupt " +
         what + " in ' .. " + k +
         ") end\n"
         "  local gt, gs = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
         "  if t > gt or (t == gt and s > gs) then return {0, t, s} end\n"
         "end\n";
}

}  // namespace pynenc_cpp::redis
