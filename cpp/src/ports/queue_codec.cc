// The consumed-queues codec: queue_codec.h.
#include "ports/queue_codec.h"

#include <algorithm>
#include <cstddef>

namespace pynenc_cpp::queue_codec {

std::string Encode(const std::vector<std::string>& queues) {
  std::string out;
  for (const std::string& q : queues) out += std::to_string(q.size()) + ":" + q;
  return out;
}

Result<std::vector<std::string>> Decode(const std::string& text, std::string_view malformed) {
  auto bad = [&] { return Status::BackendFailure(std::string(malformed) + " '" + text + "'"); };
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t colon = text.find(':', pos);
    if (colon == std::string::npos || colon == pos) return bad();
    const std::string digits = text.substr(pos, colon - pos);
    if (digits.size() > 12 ||  // no std::stoul overflow (it would throw)
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return bad();
    }
    const std::size_t len = std::stoul(digits);
    if (colon + 1 + len > text.size()) return bad();
    out.push_back(text.substr(colon + 1, len));
    pos = colon + 1 + len;
  }
  return out;
}

}  // namespace pynenc_cpp::queue_codec
