// Elections computed independently on every node from the same agreed view
// (live members + epoch), so every node of the same view picks the same leader
// with no message exchange. docs/cluster/election.md has the formulas.
//
// Thread safety: Election objects are immutable after construction; Elect() is
// const and safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pynenc_cpp/cluster/types.h"

namespace pynenc_cpp::cluster {

struct ElectionInput {
  std::string cluster_name;
  std::uint64_t epoch = 0;   // ComputeEpoch(live) (membership.h)
  std::vector<Member> live;  // Alive and Suspect members, self included; any order
  int quorum = 0;            // <= 0: no quorum gate
};

class Election {
 public:
  virtual ~Election() = default;
  Election() = default;
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;

  // The leader for this view, or nullopt when `live` has fewer than `quorum`
  // members (all classes count) or holds no eligible candidate. Members whose
  // state is not live are ignored. Deterministic: same input (in any member
  // order) -> same answer.
  std::optional<NodeId> Elect(const ElectionInput& input) const;

  // The policy's name ("oldest", "hrw", "lowest_address"), for logs.
  virtual std::string Name() const = 0;

 protected:
  // REQUIRES: `candidates` non-empty, all live, quorum already checked.
  virtual std::optional<NodeId> Choose(const ElectionInput& input,
                                       const std::vector<const Member*>& candidates) const = 0;
};

// The member that started first: smallest (started_at_ms, id). With a non-empty
// `node_class` only members of that class are candidates (others still count
// toward the quorum).
std::unique_ptr<Election> MakeOldestNodeElection(std::string node_class = "");

// Rendezvous hashing: the highest score, where score = first 8 bytes (big-endian)
// of SHA-256(cluster_name || "|" || epoch as 8 bytes big-endian || "|" || id);
// ties by smallest id.
std::unique_ptr<Election> MakeHrwElection();

// Smallest address, compared as (host, numeric port) with the port parsed from
// after the last ':' (an address without a valid port sorts as port 0); ties by id.
std::unique_ptr<Election> MakeLowestAddressElection();

// HRW score of one id (exposed for tests and docs).
std::uint64_t HrwScore(const std::string& cluster_name, std::uint64_t epoch, const NodeId& id);

}  // namespace pynenc_cpp::cluster
