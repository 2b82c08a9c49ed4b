// The three election policies and the common quorum gate (election.h).
#include "pynenc_cpp/cluster/election.h"

#include <openssl/sha.h>

#include <algorithm>
#include <charconv>
#include <tuple>
#include <utility>

namespace pynenc_cpp::cluster {

std::optional<NodeId> Election::Elect(const ElectionInput& input) const {
  std::vector<const Member*> live;
  for (const auto& m : input.live) {
    if (IsLive(m.state)) live.push_back(&m);
  }
  if (input.quorum > 0 && live.size() < static_cast<std::size_t>(input.quorum)) return std::nullopt;
  if (live.empty()) return std::nullopt;
  return Choose(input, live);
}

std::uint64_t HrwScore(const std::string& cluster_name, std::uint64_t epoch, const NodeId& id) {
  std::string in = cluster_name;
  in += '|';
  for (int i = 7; i >= 0; --i) in += static_cast<char>((epoch >> (8 * i)) & 0xff);
  in += '|';
  in += id;
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(in.data()), in.size(), d);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | d[i];
  return v;
}

namespace {

class OldestNode final : public Election {
 public:
  explicit OldestNode(std::string node_class) : node_class_(std::move(node_class)) {}
  std::string Name() const override { return "oldest"; }

 protected:
  std::optional<NodeId> Choose(const ElectionInput&,
                               const std::vector<const Member*>& candidates) const override {
    const Member* best = nullptr;
    for (const Member* m : candidates) {
      if (!node_class_.empty() && m->node_class != node_class_) continue;
      if (best == nullptr ||
          std::tie(m->started_at_ms, m->id) < std::tie(best->started_at_ms, best->id)) {
        best = m;
      }
    }
    if (best == nullptr) return std::nullopt;
    return best->id;
  }

 private:
  std::string node_class_;
};

class Hrw final : public Election {
 public:
  std::string Name() const override { return "hrw"; }

 protected:
  std::optional<NodeId> Choose(const ElectionInput& input,
                               const std::vector<const Member*>& candidates) const override {
    const Member* best = nullptr;
    std::uint64_t best_score = 0;
    for (const Member* m : candidates) {
      const std::uint64_t s = HrwScore(input.cluster_name, input.epoch, m->id);
      if (best == nullptr || s > best_score || (s == best_score && m->id < best->id)) {
        best = m;
        best_score = s;
      }
    }
    return best->id;
  }
};

// (host, port) of "host:port"; a missing or malformed port reads as 0.
std::pair<std::string, std::uint32_t> SplitAddress(const Address& a) {
  const auto colon = a.rfind(':');
  if (colon == std::string::npos) return {a, 0};
  std::uint32_t port = 0;
  const char* first = a.data() + colon + 1;
  const char* last = a.data() + a.size();
  auto [ptr, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || ptr != last || first == last || port > 65535) port = 0;
  return {a.substr(0, colon), port};
}

class LowestAddress final : public Election {
 public:
  std::string Name() const override { return "lowest_address"; }

 protected:
  std::optional<NodeId> Choose(const ElectionInput&,
                               const std::vector<const Member*>& candidates) const override {
    const Member* best = nullptr;
    std::pair<std::string, std::uint32_t> best_key;
    for (const Member* m : candidates) {
      auto key = SplitAddress(m->address);
      if (best == nullptr || key < best_key || (key == best_key && m->id < best->id)) {
        best = m;
        best_key = std::move(key);
      }
    }
    return best->id;
  }
};

}  // namespace

std::unique_ptr<Election> MakeOldestNodeElection(std::string node_class) {
  return std::make_unique<OldestNode>(std::move(node_class));
}
std::unique_ptr<Election> MakeHrwElection() { return std::make_unique<Hrw>(); }
std::unique_ptr<Election> MakeLowestAddressElection() { return std::make_unique<LowestAddress>(); }

}  // namespace pynenc_cpp::cluster
