// ComputeEpoch (membership.h): SHA-256 over the live view in join order.
#include <openssl/sha.h>

#include <algorithm>
#include <string>

#include "pynenc_cpp/cluster/membership.h"

namespace pynenc_cpp::cluster {

std::uint64_t ComputeEpoch(const std::vector<Member>& live) {
  std::vector<const Member*> sorted;
  sorted.reserve(live.size());
  for (const auto& m : live) sorted.push_back(&m);
  std::sort(sorted.begin(), sorted.end(), [](const Member* a, const Member* b) {
    if (a->started_at_ms != b->started_at_ms) return a->started_at_ms < b->started_at_ms;
    return a->id < b->id;
  });
  std::string input;
  for (const Member* m : sorted) {
    input += m->id;
    input += '|';
    input += std::to_string(m->started_at_ms);
    input += ';';
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];
  return v;
}

}  // namespace pynenc_cpp::cluster
