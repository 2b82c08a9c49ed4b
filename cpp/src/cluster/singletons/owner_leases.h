// Owner leases: the right to run one label, as a lease on the monotonic clock
// granted by a quorum, so that two nodes never run the same label at the same
// time, whatever the coordinators decide. The mastership Lease (lease.h), keyed
// by label. Protocol and safety argument: docs/cluster/singletons.md ("Owner
// leases").
//
// Summary:
//  * Every node keeps, per label, one promise slot {holder, generation, until}
//    on its own NowMs(), and the highest generation it has seen for the label.
//  * A holder (the node the coordinator told to run the label) sends, every
//    heartbeat_ms (a quarter of it while some wanted label has no lease yet),
//    one LeaseRequest with every label it wants (label, generation, stopping)
//    to every live peer, and grants itself by the same rule. Grants for one round from `quorum` distinct nodes make the label's
//    lease run until round send time + lease_ms - margin.
//  * A node grants label L to candidate C iff: it has been up lease_ms (a
//    restarted node may have forgotten promises), C is live in its view at the
//    address the request came from, and
//      - the slot is free (expired) and the generation >= the highest seen, or
//      - the slot is C's and (the generation >= the highest seen, or C says it
//        is stopping: a draining instance keeps its lease until it stopped).
//    Granting sets the slot to {C, generation, max(until, now + lease_ms)}.
//    Every request raises the highest generation seen, granted or not: a newer
//    generation (a coordinator's newer decision) stops every renewal of an
//    older one, so the older holder's lease runs out within lease_ms.
//  * A release (the instance stopped) clears the slot at once, so a successor
//    need not wait for it to run out.
// Since each grantor's promise outlives the lease it helped make and two
// quorums share a grantor, two holders of one label never hold overlapping
// leases.
//
// Thread safety: not thread-safe; lives on the Env loop thread (env.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/coordinator/messages.h"
#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/cluster/types.h"

namespace pynenc_cpp::cluster {

struct OwnerLeaseOptions {
  NodeId self_id;
  std::int64_t heartbeat_ms = 200;
  std::int64_t lease_ms = 1'000;
  std::int64_t margin_ms = 0;  // 0: max(1, lease_ms / 100)
};

struct OwnerLeaseStats {
  std::uint64_t rounds = 0;
  std::uint64_t grants_given = 0;
  std::uint64_t grants_refused = 0;
  std::uint64_t extensions = 0;
  std::uint64_t malformed = 0;
};

class OwnerLeases {
 public:
  // Called with a label's new expiry BEFORE Until() changes (write-ahead).
  using ExtendFn = std::function<void(const std::string& label, std::int64_t new_until_ms)>;

  // REQUIRES: options.lease_ms > options.heartbeat_ms > 0.
  OwnerLeases(Env& env, OwnerLeaseOptions options, ExtendFn on_extend);
  ~OwnerLeases();
  OwnerLeases(const OwnerLeases&) = delete;
  OwnerLeases& operator=(const OwnerLeases&) = delete;

  // Starts the request period; grants are refused for lease_ms after this call.
  void Start();
  // Live members (self included) and the quorum a lease needs.
  void SetView(const std::vector<Member>& live, int quorum);

  // Holder side. Wants `label` at `generation` (a higher generation replaces a
  // lower one; a lower one is ignored); asks at once, then every period.
  void Acquire(const std::string& label, Generation generation);
  // Marks a wanted label as stopping (its renewals survive a newer generation).
  void SetStopping(const std::string& label);
  // Stops asking for `label`. With `release`, its lease ends now and the peers
  // clear their promise to this node (REQUIRES: the instance no longer runs).
  void Drop(const std::string& label, bool release);
  // This node's lease on `label` is valid while env.NowMs() < Until(label); 0: none.
  std::int64_t Until(const std::string& label) const;
  bool Wanted(const std::string& label) const { return wanted_.count(label) > 0; }
  // The generation `label` is wanted at ({0,0} if it is not wanted).
  Generation WantedGeneration(const std::string& label) const {
    auto it = wanted_.find(label);
    return it == wanted_.end() ? Generation{} : it->second.generation;
  }

  // Grantor side: a frame of type kLeaseRequest/kLeaseReply/kLeaseRelease, decoded.
  void OnRequest(const Address& from, const coord_wire::LeaseRequest& request);
  void OnReply(const coord_wire::LeaseReply& reply);
  void OnRelease(const coord_wire::LeaseRelease& release);

  struct Slot {
    NodeId holder;
    Generation generation;
    std::int64_t until_ms = 0;
  };
  // The promise slot for `label` (tests and docs).
  std::optional<Slot> SlotFor(const std::string& label) const;
  Generation HighestSeen(const std::string& label) const;
  const OwnerLeaseStats& stats() const { return stats_; }
  std::int64_t margin_ms() const { return options_.margin_ms; }
  std::int64_t lease_ms() const { return options_.lease_ms; }

 private:
  struct Want {
    Generation generation;
    bool stopping = false;
    std::int64_t until_ms = 0;
  };
  struct Round {
    std::int64_t sent_ms = 0;
    std::map<std::string, std::pair<Generation, std::set<NodeId>>> grants;  // label -> grantors
  };
  bool MayGrant(const NodeId& candidate, const Address& from, const coord_wire::LeaseClaim& c);
  void Grant(const NodeId& candidate, const coord_wire::LeaseClaim& c);
  void RequestRound();
  void Arm();
  void OnGrant(std::uint64_t round, const std::string& label, const NodeId& grantor);

  Env& env_;
  OwnerLeaseOptions options_;
  ExtendFn on_extend_;
  std::map<NodeId, Address> live_;
  std::vector<Address> peers_;
  int quorum_ = 1;
  std::int64_t grants_from_ms_ = 0;
  bool started_ = false;
  std::map<std::string, Want> wanted_;
  std::map<std::string, Slot> slots_;
  std::map<std::string, Generation> highest_;
  std::uint64_t next_round_ = 1;
  std::map<std::uint64_t, Round> rounds_;
  std::optional<Env::TimerId> timer_;
  bool round_soon_ = false;
  std::optional<Env::TimerId> soon_timer_;
  OwnerLeaseStats stats_;
};

}  // namespace pynenc_cpp::cluster
