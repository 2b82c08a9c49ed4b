// The Coordinator's claims of ownership: the generation under which a label's
// next instance runs, claimed from the GenerationSource (the fence's authority),
// off the loop. ClaimTerm starts a new ownership epoch on another node (above
// every term a node reported, so a restarted cluster never goes below its
// history); ClaimSeq re-grants the label to its owner, a compare-and-set. Which
// node is chosen is placement (placement.cc, Choose in coordinator_reconcile.cc);
// what a node does with the generation it is sent is cluster/singletons/host.cc.
#include <algorithm>
#include <optional>
#include <utility>

#include "cluster/coordinator/coordinator.h"

namespace pynenc_cpp::cluster {

void Coordinator::ClaimTerm(const std::string& label, const NodeId& node) {
  Entry& e = entries_[label];
  std::uint32_t min_term = e.generation.term;
  for (const auto& [id, ns] : nodes_) {
    for (const auto& inst : ns.report.instances) {
      if (inst.label == label) min_term = std::max(min_term, inst.generation.term);
    }
    for (const auto& f : ns.report.floors) {
      if (f.label == label) min_term = std::max(min_term, f.generation.term);
    }
    min_term = std::max(min_term, ns.report.min_term);
  }
  e.store_busy = true;
  e.placing = node;
  for (auto& n : pass_view_.nodes) {
    if (n.id == node) n.running.push_back(label);
  }
  auto source = source_;
  Async<Result<Generation>>(
      [source, label, node, min_term] { return source->ClaimTerm(label, node, min_term); },
      [this, label, node](Result<Generation> r) {
        auto it = entries_.find(label);
        if (it == entries_.end()) return;
        Entry& e = it->second;
        e.store_busy = false;
        e.placing.reset();
        if (!r.ok()) {
          ++stats_.store_errors;
          ++e.failures;
          e.last_error = "generation source: " + r.status().ToString();
          e.retry_at = env_.NowMs() + options_.retry_ms;
          env_.Log(LogLevel::kError, "coordinator: claiming a term for '" + label +
                                         "' failed: " + r.status().ToString());
          Reconcile();
          return;
        }
        ++stats_.terms_claimed;
        e.owner = node;
        e.previous_owner.reset();
        e.generation = r.value();
        e.placed_before = false;
        e.spawn.reset();
        e.acked = {0, 0};
        e.waiting_for.reset();
        SendSpawn(label, e);
        Reconcile();
      });
}

void Coordinator::ClaimSeq(const std::string& label) {
  Entry& e = entries_[label];
  e.store_busy = true;
  auto source = source_;
  const NodeId owner = *e.owner;
  const Generation expected = e.generation;
  Async<Result<Generation>>(
      [source, label, owner, expected] { return source->ClaimSeq(label, owner, expected); },
      [this, label, owner](Result<Generation> r) {
        auto it = entries_.find(label);
        if (it == entries_.end()) return;
        Entry& e = it->second;
        if (r.ok()) {
          e.store_busy = false;
          ++stats_.seqs_claimed;
          if (e.owner != owner) return Reconcile();  // moved meanwhile; the claim is moot
          e.generation = r.value();
          e.placed_before = false;
          e.acked = {0, 0};
          SendSpawn(label, e);
          return Reconcile();
        }
        if (r.status().code() != ErrorCode::kConflict) {
          e.store_busy = false;
          ++stats_.store_errors;
          ++e.failures;
          e.last_error = "generation source: " + r.status().ToString();
          e.retry_at = env_.NowMs() + options_.retry_ms;
          return Reconcile();
        }
        // The source holds another ownership: it is the authority. Re-read it.
        auto source = source_;
        Async<Result<std::optional<Ownership>>>(
            [source, label] { return source->Current(label); },
            [this, label](Result<std::optional<Ownership>> cur) {
              auto it = entries_.find(label);
              if (it == entries_.end()) return;
              Entry& e = it->second;
              e.store_busy = false;
              if (cur.ok() && cur.value()) {
                e.owner = cur.value()->owner;
                e.generation = cur.value()->generation;
                e.placed_before = true;
              } else if (cur.ok()) {
                e.owner.reset();  // never claimed: place it afresh
              } else {
                ++stats_.store_errors;
                e.retry_at = env_.NowMs() + options_.retry_ms;
              }
              Reconcile();
            });
      });
}

}  // namespace pynenc_cpp::cluster
