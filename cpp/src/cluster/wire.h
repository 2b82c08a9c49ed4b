// Bounded big-endian encoding helpers for every cluster message body.
// ByteReader never reads past its input: each getter returns false on a short or
// oversized field and leaves the reader failed, so a parser can check once at
// the end (`ok()`) and reject malformed input without throwing.
//
// Thread safety: value types, one thread per object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pynenc_cpp::cluster::wire {

class ByteWriter {
 public:
  void U8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U16(std::uint16_t v) { Be(v, 2); }
  void U32(std::uint32_t v) { Be(v, 4); }
  void U64(std::uint64_t v) { Be(v, 8); }
  void I64(std::int64_t v) { Be(static_cast<std::uint64_t>(v), 8); }
  // u32 length + bytes.
  void Str(std::string_view s) {
    U32(static_cast<std::uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void Raw(std::string_view s) { out_.append(s.data(), s.size()); }
  const std::string& data() const& { return out_; }
  std::string Take() && { return std::move(out_); }

 private:
  void Be(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  bool U8(std::uint8_t& v) {
    std::uint64_t x;
    if (!Be(x, 1)) return false;
    v = static_cast<std::uint8_t>(x);
    return true;
  }
  bool U16(std::uint16_t& v) {
    std::uint64_t x;
    if (!Be(x, 2)) return false;
    v = static_cast<std::uint16_t>(x);
    return true;
  }
  bool U32(std::uint32_t& v) {
    std::uint64_t x;
    if (!Be(x, 4)) return false;
    v = static_cast<std::uint32_t>(x);
    return true;
  }
  bool U64(std::uint64_t& v) { return Be(v, 8); }
  bool I64(std::int64_t& v) {
    std::uint64_t x;
    if (!Be(x, 8)) return false;
    v = static_cast<std::int64_t>(x);
    return true;
  }
  // u32 length + bytes; fails if the length exceeds `max_len` or the input.
  bool Str(std::string& s, std::size_t max_len = 64 * 1024) {
    std::uint32_t n;
    if (!U32(n)) return false;
    if (n > max_len || n > in_.size() - pos_) return Fail();
    s.assign(in_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  // A count prefix for a repeated field; fails above `max_count`.
  bool Count(std::uint32_t& n, std::uint32_t max_count) {
    if (!U32(n)) return false;
    if (n > max_count) return Fail();
    return true;
  }
  bool Raw(std::string& s, std::size_t n) {
    if (failed_ || n > in_.size() - pos_) return Fail();
    s.assign(in_.substr(pos_, n));
    pos_ += n;
    return true;
  }

  bool ok() const { return !failed_; }
  // True when every byte was consumed and nothing failed.
  bool done() const { return !failed_ && pos_ == in_.size(); }
  std::size_t remaining() const { return failed_ ? 0 : in_.size() - pos_; }

 private:
  bool Fail() {
    failed_ = true;
    return false;
  }
  bool Be(std::uint64_t& v, std::size_t n) {
    if (failed_ || n > in_.size() - pos_) return Fail();
    v = 0;
    for (std::size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(in_[pos_ + i]);
    pos_ += n;
    return true;
  }
  std::string_view in_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace pynenc_cpp::cluster::wire
