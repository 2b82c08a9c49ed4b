// The transport's frame codec (pure, no I/O): every byte on a cluster TCP
// connection belongs to a frame
//
//   [u32 big-endian length][u8 version = 1][u8 type][body]
//
// where length = 2 + body size. docs/cluster/transport.md has the byte layout.
//
// Thread safety: FrameDecoder is a value type used by one thread at a time;
// EncodeFrame is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster::transport {

inline constexpr std::uint8_t kFrameVersion = 1;
// Bytes before the body: length (4) + version (1) + type (1).
inline constexpr std::size_t kFrameHeaderBytes = 6;
// The length field counts version + type + body.
inline constexpr std::size_t kFrameLengthOverhead = 2;

struct Frame {
  std::uint8_t type = 0;
  std::string body;

  bool operator==(const Frame&) const = default;
};

// Returns the encoded frame. REQUIRES: body.size() <= UINT32_MAX - 2 (callers
// check their max_frame_bytes first, which is far below that).
std::string EncodeFrame(std::uint8_t type, std::string_view body);

// Why a decoder stopped. Every error is final: the connection must be closed.
enum class FrameError : std::uint8_t {
  kNone = 0,
  kOversize,    // length > max_body_bytes + 2, detected from the 4 length bytes alone
  kBadLength,   // length < 2 (no room for version and type)
  kBadVersion,  // version byte != kFrameVersion, detected before the body is read
};
std::string_view FrameErrorName(FrameError e);

// Incremental decoder: bytes can arrive in any chunking. It validates the
// header as soon as its bytes are in (the length as soon as 4 bytes are
// buffered, the version as soon as the 5th is), so it never buffers a body it
// will reject: at most max_body_bytes + 6 bytes are ever held.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::size_t max_body_bytes) : max_body_bytes_(max_body_bytes) {}

  // Appends `bytes` and returns every frame completed by them, in order. On the
  // first malformed header it returns a non-OK Status (kInvalidArgument, message
  // naming the error) and the decoder stays failed: error() tells why and later
  // calls return the same error without looking at their input. Frames completed
  // before the bad header in the same call are discarded with it.
  Result<std::vector<Frame>> Feed(std::string_view bytes);

  // Applies to the next header not yet validated (the transport raises the
  // limit once a handshake is authenticated).
  void SetMaxBodyBytes(std::size_t max_body_bytes) { max_body_bytes_ = max_body_bytes; }
  std::size_t max_body_bytes() const { return max_body_bytes_; }

  FrameError error() const { return error_; }
  // Bytes held for a frame not yet complete.
  std::size_t buffered() const { return buffer_.size(); }

 private:
  Status Fail(FrameError e, std::string message);
  // Validates whatever header bytes buffer_ holds (0-6 of them).
  Status CheckHeader();

  std::size_t max_body_bytes_;
  std::string buffer_;
  FrameError error_ = FrameError::kNone;
  std::string error_message_;
};

}  // namespace pynenc_cpp::cluster::transport
