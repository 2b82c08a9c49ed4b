#include "cluster/membership/persistence.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>

namespace pynenc_cpp::cluster::membership {

namespace {

namespace fs = std::filesystem;

Status NotWritable(const std::string& dir, const std::string& reason) {
  return Status::BadConfig("state dir not writable: " + dir + ": " + reason);
}

Status EnsureDir(const std::string& dir) {
  if (dir.empty()) return Status::BadConfig("state dir is empty");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return NotWritable(dir, ec.message());
  if (!fs::is_directory(dir, ec)) return NotWritable(dir, "not a directory");
  return Status::Ok();
}

// Reads a whole small file. nullopt-like: returns false when it does not exist.
Result<std::optional<std::string>> ReadSmall(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::optional<std::string>{};
  std::ifstream in(p, std::ios::binary);
  if (!in) return Status::BadConfig("cannot read " + p.string());
  std::string s;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    s.append(buf, static_cast<std::size_t>(in.gcount()));
    if (s.size() > (1u << 20)) return Status::BadConfig("corrupt " + p.string() + ": too large");
  }
  return std::optional<std::string>(std::move(s));
}

// Writes `contents` to a fresh temporary file in `dir` and fsyncs it. Returns
// its path.
Result<std::string> WriteTemp(const std::string& dir, const std::string& name,
                              const std::string& contents) {
  static std::atomic<std::uint64_t> counter{0};
  const std::string tmp = (fs::path(dir) / ("." + name + ".tmp." + std::to_string(::getpid()) +
                                            "." + std::to_string(counter++)))
                              .string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return NotWritable(dir, std::strerror(errno));
  std::size_t off = 0;
  while (off < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + off, contents.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return NotWritable(dir, std::strerror(err));
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return NotWritable(dir, std::strerror(err));
  }
  return tmp;
}

Status ReplaceFile(const std::string& dir, const std::string& name, const std::string& contents) {
  auto tmp = WriteTemp(dir, name, contents);
  if (!tmp.ok()) return tmp.status();
  const std::string final_path = (fs::path(dir) / name).string();
  if (::rename(tmp.value().c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.value().c_str());
    return NotWritable(dir, std::strerror(err));
  }
  return Status::Ok();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

NodeId NewNodeId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    std::random_device rd;
    for (auto& b : bytes) b = static_cast<unsigned char>(rd());
  }
  static const char* kHex = "0123456789abcdef";
  NodeId id;
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

bool ValidAddress(const std::string& a) {
  if (a.empty() || a.size() > 512) return false;
  const auto colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) return false;
  for (char c : a) {
    if (c <= ' ' || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

bool IsValidNodeId(const std::string& id) {
  if (id.size() != 32) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<NodeId> LoadOrCreateNodeId(const std::string& state_dir) {
  if (Status s = EnsureDir(state_dir); !s.ok()) return s;
  const fs::path path = fs::path(state_dir) / "node_id";
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto existing = ReadSmall(path);
    if (!existing.ok()) return existing.status();
    if (existing.value().has_value()) {
      const std::string id = Trim(*existing.value());
      if (!IsValidNodeId(id)) {
        return Status::BadConfig("corrupt " + path.string() +
                                 ": expected 32 lowercase hex characters");
      }
      return id;
    }
    const NodeId id = NewNodeId();
    auto tmp = WriteTemp(state_dir, "node_id", id + "\n");
    if (!tmp.ok()) return tmp.status();
    const int rc = ::link(tmp.value().c_str(), path.c_str());
    const int err = errno;
    ::unlink(tmp.value().c_str());
    if (rc == 0) return id;
    if (err != EEXIST) return NotWritable(state_dir, std::strerror(err));
    // Lost a race with another process: read its id.
  }
  return Status::BadConfig("corrupt " + path.string() + ": could not be created");
}

Result<std::uint64_t> LoadIncarnation(const std::string& state_dir) {
  const fs::path path = fs::path(state_dir) / "incarnation";
  auto content = ReadSmall(path);
  if (!content.ok()) return content.status();
  if (!content.value().has_value()) return std::uint64_t{0};
  const std::string s = Trim(*content.value());
  if (s.empty() || s.size() > 20) return Status::BadConfig("corrupt " + path.string());
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return Status::BadConfig("corrupt " + path.string());
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return Status::BadConfig("corrupt " + path.string());
    v = v * 10 + d;
  }
  return v;
}

Status StoreIncarnation(const std::string& state_dir, std::uint64_t incarnation) {
  if (Status s = EnsureDir(state_dir); !s.ok()) return s;
  return ReplaceFile(state_dir, "incarnation", std::to_string(incarnation) + "\n");
}

Result<std::vector<Address>> LoadPeers(const std::string& state_dir) {
  auto content = ReadSmall(fs::path(state_dir) / "peers");
  if (!content.ok()) return content.status();
  std::vector<Address> out;
  if (!content.value().has_value()) return out;
  std::set<Address> seen;
  std::istringstream in(*content.value());
  std::string line;
  while (std::getline(in, line) && out.size() < kMaxCachedPeers) {
    line = Trim(line);
    if (ValidAddress(line) && seen.insert(line).second) out.push_back(line);
  }
  return out;
}

Status StorePeers(const std::string& state_dir, const std::vector<Address>& peers) {
  if (Status s = EnsureDir(state_dir); !s.ok()) return s;
  std::string body;
  std::set<Address> seen;
  for (const auto& p : peers) {
    if (seen.size() >= kMaxCachedPeers) break;
    if (ValidAddress(p) && seen.insert(p).second) body += p + "\n";
  }
  return ReplaceFile(state_dir, "peers", body);
}

Result<std::uint32_t> LoadTermFloor(const std::string& state_dir) {
  const fs::path path = fs::path(state_dir) / "term_floor";
  auto content = ReadSmall(path);
  if (!content.ok()) return content.status();
  if (!content.value().has_value()) return std::uint32_t{0};
  const std::string s = Trim(*content.value());
  std::uint64_t v = 0;
  bool ok = !s.empty() && s.size() <= 10;
  for (char c : s) {
    if (c < '0' || c > '9') ok = false;
    if (ok) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (!ok || v > UINT32_MAX) {
    return Status::BadConfig("corrupt " + path.string() +
                             ": expected a decimal term (remove the file to forget this node's "
                             "generation history)");
  }
  return static_cast<std::uint32_t>(v);
}

Status StoreTermFloor(const std::string& state_dir, std::uint32_t term) {
  if (Status s = EnsureDir(state_dir); !s.ok()) return s;
  return ReplaceFile(state_dir, "term_floor", std::to_string(term) + "\n");
}

}  // namespace pynenc_cpp::cluster::membership
