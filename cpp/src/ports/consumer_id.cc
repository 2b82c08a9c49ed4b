// A broker connection's consumer id: consumer_id.h.
#include "ports/consumer_id.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <random>

namespace pynenc_cpp::broker_ids {

std::string NewConsumerId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  std::random_device rd;
  const std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%s-%ld-%016llx", host, static_cast<long>(getpid()),
                static_cast<unsigned long long>(r));
  return buf;
}

}  // namespace pynenc_cpp::broker_ids
