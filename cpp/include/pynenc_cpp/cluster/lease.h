// Mastership as a lease on the monotonic clock, granted by a quorum, so that two
// nodes never hold overlapping leases, even when one of them was frozen with
// SIGSTOP. Protocol and safety argument: docs/cluster/supervisor.md ("Lease").
//
// Summary:
//  * Every node keeps one promise slot {holder, until} on its own NowMs().
//  * The node its own election picks (with quorum) sends LeaseRequest{seq} to
//    every live peer each heartbeat_ms and remembers the send time t(seq); it
//    also grants itself under the rule below.
//  * A node grants a request from C iff its own election currently picks C (at
//    the address the request came from), it has been up for at least lease_ms
//    (a restarted node may have forgotten a promise it made before the crash),
//    and its promise slot is free (now >= until) or already C's. Granting sets
//    the slot to {C, now + lease_ms}. Every request gets a LeaseGrant reply.
//  * Once grants for one seq (its own included) come from `quorum` distinct
//    nodes, C's lease runs until t(seq) + lease_ms - margin. Renewals only
//    extend it. Since each grantor's promise outlives the lease it helped make
//    and two quorums share a grantor, leases of different nodes never overlap.
//  * Release() (graceful leave, after the work stopped) ends the lease at once
//    and tells peers to clear their promise to this node, so a successor need
//    not wait for it to run out.
//
// Messages are frame types 32..34 (env.h kLeaseTypeBase); their codec is in
// cpp/src/cluster/lease/lease_codec.h.
//
// Thread safety: not thread-safe; lives on the Env loop thread (env.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/cluster/types.h"

namespace pynenc_cpp::cluster {

struct LeaseOptions {
  NodeId self_id;
  std::int64_t heartbeat_ms = 200;  // request (renewal) period
  std::int64_t lease_ms = 1'000;    // ClusterOptions default: suspect_timeout_ms
  // Subtracted from every lease to cover clock-rate differences between nodes.
  // 0: max(1, lease_ms / 100), i.e. tolerates a 1% rate difference.
  std::int64_t margin_ms = 0;
};

// The part of this node's view the lease needs. Pushed by the owner (NodeCore)
// whenever it changes.
struct LeaseView {
  struct Candidate {
    NodeId id;
    Address address;
  };
  std::optional<Candidate> elected;  // this node's election, with quorum; nullopt: no one
  std::vector<Address> peers;        // live members other than self (request targets)
  int quorum = 1;                    // distinct grants (self included) a lease needs
  std::uint64_t epoch = 0;           // carried in requests, for logs only
};

struct LeaseStats {
  std::uint64_t requests_sent = 0;  // one per peer per round
  std::uint64_t grants_given = 0;   // to peers and to self
  std::uint64_t grants_refused = 0;
  std::uint64_t extensions = 0;
  std::uint64_t malformed = 0;  // undecodable lease frames (ignored)
};

class Lease {
 public:
  // Called with the new expiry BEFORE LeaseUntil() changes (write-ahead: the
  // owner records it, then tells the supervisor).
  using ExtendFn = std::function<void(std::int64_t new_until_ms)>;

  // REQUIRES: options.lease_ms > options.heartbeat_ms > 0.
  Lease(Env& env, LeaseOptions options, ExtendFn on_extend);
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // Starts the request period. Grants are refused until lease_ms after this call.
  void Start();
  // Stops requesting (the held lease simply runs out) and keeps answering peers.
  void StopRequesting();
  // Ends this node's lease now (LeaseUntil() becomes 0, never extended again) and
  // sends LeaseRelease to `view().peers`. REQUIRES: the work is no longer running.
  void Release();

  void SetView(LeaseView view);
  const LeaseView& view() const { return view_; }

  // A lease frame (types 32..47). Malformed or unknown frames are counted and
  // ignored; never throws.
  void OnFrame(const Address& from, std::uint8_t type, std::string_view payload);

  // This node's lease is valid while env.NowMs() < LeaseUntil(). 0: never held.
  std::int64_t LeaseUntil() const { return lease_until_ms_; }
  struct Promise {
    NodeId holder;
    std::int64_t until_ms = 0;
  };
  const Promise& promise() const { return promise_; }
  LeaseStats Stats() const { return stats_; }
  std::int64_t margin_ms() const { return options_.margin_ms; }

 private:
  struct Round {
    std::int64_t sent_ms = 0;
    std::set<NodeId> grantors;
  };
  bool SelfElected() const;
  bool MayGrant(const NodeId& candidate, const Address& from) const;
  void RequestRound();
  void Arm();
  void OnGrant(std::uint64_t seq, const NodeId& grantor);

  Env& env_;
  LeaseOptions options_;
  ExtendFn on_extend_;
  LeaseView view_;
  Promise promise_;
  std::int64_t lease_until_ms_ = 0;
  std::int64_t grants_from_ms_ = 0;
  std::uint64_t next_seq_ = 1;
  std::map<std::uint64_t, Round> rounds_;  // outstanding requests, newest kept
  bool requesting_ = false;
  bool released_ = false;
  std::optional<Env::TimerId> timer_;
  LeaseStats stats_;
};

}  // namespace pynenc_cpp::cluster
