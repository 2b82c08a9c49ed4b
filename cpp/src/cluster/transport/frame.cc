#include "cluster/transport/frame.h"

#include <algorithm>

#include "cluster/wire.h"

namespace pynenc_cpp::cluster::transport {

std::string EncodeFrame(std::uint8_t type, std::string_view body) {
  wire::ByteWriter w;
  w.U32(static_cast<std::uint32_t>(body.size() + kFrameLengthOverhead));
  w.U8(kFrameVersion);
  w.U8(type);
  w.Raw(body);
  return std::move(w).Take();
}

std::string_view FrameErrorName(FrameError e) {
  switch (e) {
    case FrameError::kNone:
      return "none";
    case FrameError::kOversize:
      return "oversize";
    case FrameError::kBadLength:
      return "bad_length";
    case FrameError::kBadVersion:
      return "bad_version";
  }
  return "unknown";
}

Status FrameDecoder::Fail(FrameError e, std::string message) {
  error_ = e;
  error_message_ = std::move(message);
  buffer_.clear();
  buffer_.shrink_to_fit();
  return Status::InvalidArgument(error_message_);
}

namespace {
std::uint32_t ReadLength(std::string_view b) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(b[i]);
  return v;
}
}  // namespace

Status FrameDecoder::CheckHeader() {
  if (buffer_.size() >= 4) {
    const std::uint64_t length = ReadLength(buffer_);
    if (length < kFrameLengthOverhead) {
      return Fail(FrameError::kBadLength, "frame length " + std::to_string(length) + " < 2");
    }
    if (length - kFrameLengthOverhead > max_body_bytes_) {
      return Fail(FrameError::kOversize, "frame body of " + std::to_string(length - 2) +
                                             " bytes over the limit of " +
                                             std::to_string(max_body_bytes_));
    }
  }
  if (buffer_.size() >= 5) {
    const auto version = static_cast<unsigned char>(buffer_[4]);
    if (version != kFrameVersion) {
      return Fail(FrameError::kBadVersion, "frame version " + std::to_string(version) + " != 1");
    }
  }
  return Status::Ok();
}

Result<std::vector<Frame>> FrameDecoder::Feed(std::string_view bytes) {
  if (error_ != FrameError::kNone) return Status::InvalidArgument(error_message_);
  std::vector<Frame> out;
  while (true) {
    // Take only what the current frame needs, so that a bad header is seen
    // before any byte past it is buffered.
    std::size_t need = kFrameHeaderBytes;
    if (buffer_.size() >= 4) need = 4 + static_cast<std::size_t>(ReadLength(buffer_));
    if (buffer_.size() < kFrameHeaderBytes) {
      // Header bytes one region at a time: the length first, then the rest.
      const std::size_t want = (buffer_.size() < 4 ? 4 : kFrameHeaderBytes) - buffer_.size();
      const std::size_t take = std::min(want, bytes.size());
      buffer_.append(bytes.data(), take);
      bytes.remove_prefix(take);
      if (Status s = CheckHeader(); !s.ok()) return s;
      if (take < want) return out;  // input exhausted inside the header
      continue;
    }
    const std::size_t take = std::min(need - buffer_.size(), bytes.size());
    buffer_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (buffer_.size() < need) return out;
    Frame f;
    f.type = static_cast<std::uint8_t>(buffer_[5]);
    f.body.assign(buffer_, kFrameHeaderBytes, std::string::npos);
    out.push_back(std::move(f));
    buffer_.clear();
    if (bytes.empty()) return out;
  }
}

}  // namespace pynenc_cpp::cluster::transport
