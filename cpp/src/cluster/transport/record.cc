#include "cluster/transport/record.h"

#include <climits>
#include <cstring>

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace pynenc_cpp::cluster::transport {

namespace {

using Nonce12 = std::array<unsigned char, kRecordIvBytes>;

Nonce12 NonceFor(const RecordKey& k, std::uint64_t seq) {
  Nonce12 n = k.iv;
  for (int i = 0; i < 8; ++i) {
    n[kRecordIvBytes - 1 - i] ^= static_cast<unsigned char>((seq >> (8 * i)) & 0xff);
  }
  return n;
}

// A context with the cipher and key set (the nonce is set per record), or
// nullptr if OpenSSL fails.
evp_cipher_ctx_st* NewContext(const RecordKey& k, bool encrypt) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx == nullptr) return nullptr;
  const EVP_CIPHER* cipher = EVP_aes_256_gcm();
  const int ok = encrypt ? EVP_EncryptInit_ex(ctx, cipher, nullptr, k.key.data(), nullptr)
                         : EVP_DecryptInit_ex(ctx, cipher, nullptr, k.key.data(), nullptr);
  if (ok != 1) {
    EVP_CIPHER_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

unsigned char* Bytes(std::string& s, std::size_t at) {
  return reinterpret_cast<unsigned char*>(s.data() + at);
}

std::array<unsigned char, kFrameHeaderBytes> Header(std::size_t body_size) {
  const auto length = static_cast<std::uint32_t>(body_size + kFrameLengthOverhead);
  return {static_cast<unsigned char>(length >> 24), static_cast<unsigned char>(length >> 16),
          static_cast<unsigned char>(length >> 8),  static_cast<unsigned char>(length),
          kFrameVersion,                             kSealed};
}

}  // namespace

std::optional<RecordKey> DeriveClientRecordKey(std::string_view secret, const Transcript& t) {
  auto key = ComputeProof(secret, kClientRecordKeyLabel, t);
  auto iv = ComputeProof(secret, kClientRecordIvLabel, t);
  std::optional<RecordKey> k;
  if (key && iv) {
    k.emplace();
    std::memcpy(k->key.data(), key->data(), kRecordKeyBytes);
    std::memcpy(k->iv.data(), iv->data(), kRecordIvBytes);
  }
  if (key) OPENSSL_cleanse(key->data(), key->size());  // no key material left behind
  if (iv) OPENSSL_cleanse(iv->data(), iv->size());
  return k;
}

std::string PrepareRecord(std::uint8_t type, std::string_view payload) {
  const std::size_t body = 1 + payload.size() + kRecordTagBytes;
  std::string out;
  out.reserve(kFrameHeaderBytes + body);
  const auto h = Header(body);
  out.append(reinterpret_cast<const char*>(h.data()), h.size());
  out.push_back(static_cast<char>(type));
  out.append(payload.data(), payload.size());
  out.append(kRecordTagBytes, '\0');
  return out;
}

RecordSealer::RecordSealer(const RecordKey& key) : ctx_(NewContext(key, true)), key_(key) {}
RecordSealer::~RecordSealer() {
  EVP_CIPHER_CTX_free(ctx_);
  OPENSSL_cleanse(&key_, sizeof key_);
}

bool RecordSealer::SealInPlace(std::string& record) {
  if (ctx_ == nullptr || record.size() < kFrameHeaderBytes + kRecordOverhead) return false;
  const std::size_t body = record.size() - kFrameHeaderBytes;
  const std::size_t text = body - kRecordTagBytes;
  const auto h = Header(body);
  if (body > INT_MAX || std::memcmp(record.data(), h.data(), h.size()) != 0) return false;
  if (seq_ == UINT64_MAX) return false;  // never reached; a nonce is never reused
  const auto nonce = NonceFor(key_, seq_);
  int len = 0;
  if (EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
      EVP_EncryptUpdate(ctx_, nullptr, &len, h.data(), static_cast<int>(h.size())) != 1 ||
      EVP_EncryptUpdate(ctx_, Bytes(record, kFrameHeaderBytes), &len,
                        Bytes(record, kFrameHeaderBytes), static_cast<int>(text)) != 1 ||
      EVP_EncryptFinal_ex(ctx_, Bytes(record, kFrameHeaderBytes + text), &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kRecordTagBytes),
                          Bytes(record, kFrameHeaderBytes + text)) != 1) {
    return false;
  }
  ++seq_;
  return true;
}

std::string RecordSealer::Seal(std::uint8_t type, std::string_view payload) {
  std::string r = PrepareRecord(type, payload);
  return SealInPlace(r) ? r : std::string();
}

RecordOpener::RecordOpener(const RecordKey& key) : ctx_(NewContext(key, false)), key_(key) {}
RecordOpener::~RecordOpener() {
  EVP_CIPHER_CTX_free(ctx_);
  OPENSSL_cleanse(&key_, sizeof key_);
}

std::optional<Frame> RecordOpener::Open(Frame frame) {
  if (ctx_ == nullptr || frame.type != kSealed || frame.body.size() < kRecordOverhead ||
      frame.body.size() > INT_MAX || seq_ == UINT64_MAX) {
    return std::nullopt;
  }
  const std::size_t text = frame.body.size() - kRecordTagBytes;
  const auto h = Header(frame.body.size());
  const auto nonce = NonceFor(key_, seq_);
  int len = 0;
  if (EVP_DecryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
      EVP_DecryptUpdate(ctx_, nullptr, &len, h.data(), static_cast<int>(h.size())) != 1 ||
      EVP_DecryptUpdate(ctx_, Bytes(frame.body, 0), &len, Bytes(frame.body, 0),
                        static_cast<int>(text)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kRecordTagBytes),
                          Bytes(frame.body, text)) != 1 ||
      EVP_DecryptFinal_ex(ctx_, Bytes(frame.body, text), &len) != 1) {
    return std::nullopt;
  }
  ++seq_;
  Frame out;
  out.type = static_cast<std::uint8_t>(frame.body[0]);
  frame.body.resize(text);
  frame.body.erase(0, 1);
  out.body = std::move(frame.body);
  return out;
}

}  // namespace pynenc_cpp::cluster::transport
