// "host:port" addresses as the transport uses them (pure helpers, no I/O).
// IPv6 literals are bracketed: "[::1]:7000".
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster::transport {

struct HostPort {
  std::string host;  // without brackets
  std::uint16_t port = 0;
};

// kInvalidArgument for an empty host, a missing/non-numeric/out-of-range port,
// or unbalanced brackets.
Result<HostPort> ParseAddress(std::string_view address);
// Inverse of ParseAddress: brackets a host containing ':'.
std::string FormatAddress(std::string_view host, std::uint16_t port);
// True for "localhost", any 127.0.0.0/8 literal and ::1 (also the IPv4-mapped
// ::ffff:127.x.y.z). Hostnames other than "localhost" are not resolved: they
// count as non-loopback.
bool IsLoopbackHost(std::string_view host);

}  // namespace pynenc_cpp::cluster::transport
