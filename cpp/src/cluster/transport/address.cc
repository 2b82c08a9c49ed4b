#include "cluster/transport/address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace pynenc_cpp::cluster::transport {

Result<HostPort> ParseAddress(std::string_view address) {
  const auto bad = [&](const char* why) {
    return Status::InvalidArgument("bad address '" + std::string(address) + "': " + why);
  };
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return bad("expected host:port");
  std::string_view host = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 2 || host.back() != ']') return bad("unbalanced brackets");
    host = host.substr(1, host.size() - 2);
  } else if (host.find_first_of("[]:") != std::string_view::npos) {
    return bad("an IPv6 host needs brackets");
  }
  if (host.empty()) return bad("empty host");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return bad("port must be 0-65535");
  }
  return HostPort{std::string(host), static_cast<std::uint16_t>(value)};
}

std::string FormatAddress(std::string_view host, std::uint16_t port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out = "[" + std::string(host) + "]";
  } else {
    out = std::string(host);
  }
  return out + ":" + std::to_string(port);
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    static const unsigned char kLoop[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (std::memcmp(v6.s6_addr, kLoop, 16) == 0) return true;
    static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(v6.s6_addr, kMapped, 12) == 0 && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace pynenc_cpp::cluster::transport
