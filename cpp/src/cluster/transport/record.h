// The transport's record layer (pure, no I/O): after the handshake every
// protocol frame travels sealed with AES-256-GCM (OpenSSL EVP), keyed from the
// cluster secret and the handshake transcript, so a frame nobody with the
// secret sealed for this very connection, at this very position, is refused:
//
//   outer frame  [u32 length][u8 version = 1][u8 type = kSealed][ciphertext][16-byte tag]
//   plaintext    [u8 protocol type][payload]
//   AAD          the 6 outer header bytes
//   nonce        iv XOR (4 zero bytes | u64 big-endian sequence number)
//   key, iv      HMAC-SHA256(secret, Str(label) | transcript), labels below;
//                the iv is the first 12 bytes of its HMAC
//
// The sequence number counts the sealed frames of one connection from 0 and is
// never sent: a frame replayed, dropped, reordered or moved to another
// connection (whose key differs, since both nonces are fresh) does not open.
// Only the dialing side sends protocol frames (the accepting side is silent
// after ACCEPT), so one key per connection is derived: client to server.
// docs/cluster/transport.md has the byte layout and a known-answer example.
//
// Thread safety: RecordSealer and RecordOpener are used by one thread at a time
// (each belongs to one connection); the free functions are pure.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/transport/frame.h"
#include "cluster/transport/handshake.h"

struct evp_cipher_ctx_st;

namespace pynenc_cpp::cluster::transport {

// Frame type of a sealed protocol frame (a transport type, below kFirstProtocolType).
inline constexpr std::uint8_t kSealed = 5;
inline constexpr std::size_t kRecordKeyBytes = 32;
inline constexpr std::size_t kRecordIvBytes = 12;
inline constexpr std::size_t kRecordTagBytes = 16;
// Sealed body = 1 (protocol type) + payload + tag.
inline constexpr std::size_t kRecordOverhead = 1 + kRecordTagBytes;

inline constexpr std::string_view kClientRecordKeyLabel =
    "pynenc-cpp/transport/v1/client-record-key";
inline constexpr std::string_view kClientRecordIvLabel =
    "pynenc-cpp/transport/v1/client-record-iv";

struct RecordKey {
  std::array<unsigned char, kRecordKeyBytes> key{};
  std::array<unsigned char, kRecordIvBytes> iv{};
};

// The client-to-server key of the connection whose handshake `t` describes.
// nullopt for an empty secret or if OpenSSL fails (callers close the connection).
std::optional<RecordKey> DeriveClientRecordKey(std::string_view secret, const Transcript& t);

// A protocol frame laid out for sealing in place: the outer header (final
// length, version, kSealed), the protocol type, the payload and room for the
// tag. REQUIRES: payload.size() <= UINT32_MAX - 2 - kRecordOverhead.
std::string PrepareRecord(std::uint8_t type, std::string_view payload);

// Seals the records of one connection in order.
class RecordSealer {
 public:
  explicit RecordSealer(const RecordKey& key);
  ~RecordSealer();
  RecordSealer(const RecordSealer&) = delete;
  RecordSealer& operator=(const RecordSealer&) = delete;

  // Encrypts a PrepareRecord() string in place and writes its tag, with the
  // next sequence number. False (record left unspecified, nothing consumed
  // except on success) if it is not a prepared record or OpenSSL fails; the
  // connection must then be closed.
  bool SealInPlace(std::string& record);
  // Convenience for tests and tools: PrepareRecord + SealInPlace; empty on failure.
  std::string Seal(std::uint8_t type, std::string_view payload);
  std::uint64_t next_sequence() const { return seq_; }

 private:
  evp_cipher_ctx_st* ctx_;
  RecordKey key_;
  std::uint64_t seq_ = 0;
};

// Opens the records of one connection in order.
class RecordOpener {
 public:
  explicit RecordOpener(const RecordKey& key);
  ~RecordOpener();
  RecordOpener(const RecordOpener&) = delete;
  RecordOpener& operator=(const RecordOpener&) = delete;

  // Opens `frame` (decrypted in place) and returns the protocol frame it
  // carries, or nullopt if it is not a kSealed frame whose tag verifies under
  // this connection's key at the next sequence number (forged, altered,
  // replayed, reordered, or sealed for another connection). A failure is final
  // for the connection: the caller closes it (the sequence number does not
  // advance on failure, so nothing after it could open either).
  std::optional<Frame> Open(Frame frame);
  std::uint64_t next_sequence() const { return seq_; }

 private:
  evp_cipher_ctx_st* ctx_;
  RecordKey key_;
  std::uint64_t seq_ = 0;
};

}  // namespace pynenc_cpp::cluster::transport
