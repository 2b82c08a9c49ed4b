#include "cluster/membership/persistence.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <algorithm>
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

namespace {

bool ParseU32(std::string_view s, std::uint32_t& out) {
  if (s.empty() || s.size() > 10) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  out = static_cast<std::uint32_t>(v);
  return true;
}

bool FromHex(std::string_view hex, std::string& out) {
  if (hex.empty() || hex.size() % 2 != 0) return false;
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  out.clear();
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

}  // namespace

Result<std::map<std::string, Generation>> LoadGenerations(const std::string& state_dir) {
  const fs::path path = fs::path(state_dir) / "generations";
  auto content = ReadSmall(path);
  if (!content.ok()) return content.status();
  std::map<std::string, Generation> out;
  if (!content.value().has_value()) return out;
  std::istringstream in(*content.value());
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = Trim(line);
    if (line.empty()) continue;
    const auto space = line.find(' ');
    const auto dot = line.find('.');
    std::uint32_t term = 0, seq = 0;
    std::string label;
    if (space == std::string::npos || dot == std::string::npos || dot > space ||
        !ParseU32(std::string_view(line).substr(0, dot), term) ||
        !ParseU32(std::string_view(line).substr(dot + 1, space - dot - 1), seq) ||
        !FromHex(std::string_view(line).substr(space + 1), label)) {
      return Status::BadConfig("corrupt " + path.string() + ": line " + std::to_string(n) +
                               " is not '<term>.<seq> <hex label>' (remove the file to forget "
                               "this node's generation history)");
    }
    Generation& g = out[label];
    g = std::max(g, Generation{term, seq});
  }
  return out;
}

Status StoreGenerations(const std::string& state_dir,
                        const std::map<std::string, Generation>& generations) {
  if (Status s = EnsureDir(state_dir); !s.ok()) return s;
  static const char* kHex = "0123456789abcdef";
  std::string body;
  for (const auto& [label, g] : generations) {
    if (label.empty()) continue;
    body += g.ToString() + " ";
    for (unsigned char c : label) {
      body.push_back(kHex[c >> 4]);
      body.push_back(kHex[c & 15]);
    }
    body.push_back('\n');
  }
  return ReplaceFile(state_dir, "generations", body);
}

}  // namespace pynenc_cpp::cluster::membership
