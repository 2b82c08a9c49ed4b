#include "pynenc_cpp/core/call_ids.h"

#include <openssl/sha.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace pynenc_cpp {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendHex(const unsigned char* bytes, std::size_t n, std::string* out) {
  for (std::size_t i = 0; i < n; ++i) {
    out->push_back(kHex[bytes[i] >> 4]);
    out->push_back(kHex[bytes[i] & 0x0f]);
  }
}

}  // namespace

Result<std::string> NewInvocationId() {
  unsigned char b[16];
  std::size_t got = 0;
  while (got < sizeof(b)) {
    ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::BackendFailure(std::string("no random bytes for an invocation id: ") +
                                    std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  out.reserve(36);
  AppendHex(b, 4, &out);
  out.push_back('-');
  AppendHex(b + 4, 2, &out);
  out.push_back('-');
  AppendHex(b + 6, 2, &out);
  out.push_back('-');
  AppendHex(b + 8, 2, &out);
  out.push_back('-');
  AppendHex(b + 10, 6, &out);
  return out;
}

std::string JsonStringOf(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0x0f]);
        } else {
          out.push_back(ch);  // UTF-8 bytes as they are (ensure_ascii=False)
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string ArgsId(std::vector<std::pair<std::string, std::string>> serialized_arguments) {
  if (serialized_arguments.empty()) return "no_args";
  // Byte order of UTF-8 is code-point order: Python's sorted() of the names.
  std::sort(serialized_arguments.begin(), serialized_arguments.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // pynenc feeds the hasher piece by piece; the digest of the pieces joined is the same.
  std::string message;
  for (const auto& [name, text] : serialized_arguments) {
    message += JsonStringOf(name);
    message.push_back('=');
    message += JsonStringOf(text);
    message.push_back(';');
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest);
  std::string out;
  out.reserve(2 * SHA256_DIGEST_LENGTH);
  AppendHex(digest, SHA256_DIGEST_LENGTH, &out);
  return out;
}

}  // namespace pynenc_cpp
