// A cluster of Membership nodes on a SimWorld, for scenario tests: node i listens
// at "10.0.0.<i+1>:7000" with id "node-<i>" padded to 32 hex-like characters;
// every node's seed is node 0. Records every event each node sees.
//
// Thread safety: not thread-safe (single test thread, like SimWorld).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pynenc_cpp/cluster/membership.h"
#include "sim/sim.h"

namespace pynenc_cpp::cluster::sim {

struct SeenEvent {
  std::int64_t at = 0;
  int observer = 0;
  MemberEventKind kind = MemberEventKind::kJoined;
  NodeId about;
  std::uint64_t incarnation = 0;
  MemberState state = MemberState::kAlive;  // the member's state after the change
  int life = 0;  // how many times the observer was booted before (restarts)
  bool operator==(const SeenEvent&) const = default;
};

class SimCluster {
 public:
  SimCluster(std::uint64_t seed, int n, MembershipOptions base);

  SimWorld& world() { return world_; }
  int size() const { return static_cast<int>(nodes_.size()); }
  Membership& node(int i) { return *nodes_[i].membership; }
  const Address& address(int i) const { return nodes_[i].address; }
  const NodeId& id(int i) const { return nodes_[i].id; }
  bool up(int i) const { return nodes_[i].membership != nullptr; }
  // Incarnation last reported through SetOnIncarnation (the "persisted" value).
  std::uint64_t persisted_incarnation(int i) const { return nodes_[i].persisted; }

  void StartAll();
  void Crash(int i);
  // Revive with the same id at persisted incarnation + 1, like a restarted process.
  void Restart(int i);

  // Every up node in `group` sees exactly the members of `group` as Alive (no
  // Suspect) and they all compute the same epoch.
  bool Converged(const std::vector<int>& group) const;
  bool AllConverged() const;
  std::vector<int> UpNodes() const;

  const std::vector<SeenEvent>& events() const { return events_; }
  // True when, for every (observer process, member) pair, the events form a legal
  // sequence of transitions (joined, then suspected/alive_again pairs, then dead
  // or left, then possibly joined again...): no transition reported twice or
  // from the wrong state. Otherwise false with the first offence in `why`.
  bool EventsWellFormed(std::string* why) const;
  // Events of `kind` about node `about` seen by `observer`.
  int Count(int observer, MemberEventKind kind, int about) const;

 private:
  struct Node {
    Address address;
    NodeId id;
    std::unique_ptr<Membership> membership;
    std::uint64_t persisted = 0;
    int boots = 0;
  };
  void Boot(int i, std::uint64_t incarnation);

  SimWorld world_;
  MembershipOptions base_;
  std::vector<Node> nodes_;
  std::vector<SeenEvent> events_;
};

}  // namespace pynenc_cpp::cluster::sim
