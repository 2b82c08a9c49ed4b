// Host: the node side of the coordinator protocol. Runs (through its owner's
// hooks) the instances the Coordinator asks for and enforces, on the node,
// everything the Coordinator cannot:
//  * the generation fence: a command carrying a generation lower than the one
//    this node knows for the label is refused (kStaleGeneration), and so is a
//    spawn under a generation whose instance already ran here;
//  * the owner lease: an instance starts only once this node holds the label's
//    owner lease (owner_leases.h) and is stopped stop_lead_ms before it would
//    run out (a timer fires then; the check also runs before every event);
//  * activation gating: an instance starts only while the node sees quorum and
//    has seen it for stabilize_ms; losing quorum stops every instance.
// Every spawn and stop gets exactly one Ack (success, failure, cancelled,
// superseded or refused): none is ever left unanswered. The node reports its
// registry, families and instances to the leader on every change and every
// report_interval_ms.
//
// Instance phases: kAcquiring (waiting for the lease and gating) -> kStarting
// (hooks.start called; the owner answers Started) -> kActive -> kStopping
// (hooks.stop called; the owner answers Stopped) -> gone.
//
// Thread safety: not thread-safe; lives on the Env loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/coordinator/messages.h"
#include "cluster/singletons/owner_leases.h"
#include "pynenc_cpp/cluster/agents.h"
#include "pynenc_cpp/cluster/env.h"
#include "pynenc_cpp/cluster/instance.h"

namespace pynenc_cpp::cluster {

struct HostOptions {
  NodeId self_id;
  std::int64_t stabilize_ms = 500;
  std::int64_t report_interval_ms = 2'000;
  // An instance is stopped this long BEFORE its owner lease runs out (and is not
  // started with less than this left), so its stop has this long, plus the
  // lease margin, before a successor can hold the lease. A healthy node renews
  // every heartbeat and never comes close.
  std::int64_t stop_lead_ms = 0;
};

// One activation-log record about an instance ("instance_start" before the
// factory runs, "instance_stop" after the stop returned, "instance_failed"
// when the factory failed, "instance_lease_expired" when the node found the
// lease ran out, "instance_regrant" for a higher generation on a running one).
struct InstanceRecord {
  std::string event;
  std::string label;
  Generation generation;
  std::int64_t mono_ms = 0;
  std::int64_t lease_until_mono_ms = 0;
  std::string reason;
};

struct HostHooks {
  // Build and start the instance; answer with Host::Started(label, gen, status).
  std::function<void(const InstanceContext&)> start;
  // Stop it; answer with Host::Stopped(label, gen).
  std::function<void(const std::string& label, Generation gen, const std::string& reason)> stop;
  // A running instance now holds a higher generation.
  std::function<void(const std::string& label, Generation gen)> regrant;
  std::function<void(const InstanceRecord&)> record;
};

class Host {
 public:
  Host(Env& env, OwnerLeases& leases, HostOptions options, HostHooks hooks);
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  void Start();

  // The spawn registry and the agent families this node offers.
  void SetActorTypes(std::set<std::string> types);
  void SetFamilies(std::vector<AgentFamily> families);

  // This node's view: quorum, where the leader is, its own incarnation.
  void SetView(bool has_quorum, std::optional<Address> leader, std::uint64_t incarnation);

  void OnCommand(const Address& from, const coord_wire::Command& command);
  void OnReportRequest(const Address& from);

  // The owner's answers to hooks.start / hooks.stop (any order of events; an
  // answer for an instance that is no longer in that phase is ignored).
  void Started(const std::string& label, Generation gen, const Status& status);
  void Stopped(const std::string& label, Generation gen);
  // The owner found `label`'s storage fenced at `floor`, above the generation it
  // was given (its instance cannot write there). A running or starting instance
  // below the floor is discarded (recorded "instance_failed"), spawns below it
  // are refused, and the floor travels in every report so the leader claims a
  // term above it. Floors only rise.
  void RaiseFloor(const std::string& label, Generation floor);
  // Before Start: the highest term an instance started under on this node in
  // earlier processes (the state dir's term_floor), reported to the leader so
  // that a leader whose generation source forgot claims terms above it.
  void SetTermFloor(std::uint32_t term) { term_floor_ = term; }

  // Before every event: stops instances whose lease ran out; lets go of the
  // lease of a stop that outlasted its drain time.
  void CheckExpiry();
  // After every event: starts the instances whose gating now holds; sends the
  // report if anything changed.
  void AfterEvent();

  // Before a graceful leave: the node reports itself leaving (offering no type
  // and no family) so the leader moves its instances elsewhere, drained like any
  // move; new spawns are refused. Shutdown() later stops whatever is left.
  void BeginLeave();
  bool leaving() const { return leaving_; }
  // Terminal: every instance stops ("shutdown"), pending spawns are refused.
  void Shutdown();
  bool Idle() const { return instances_.empty(); }

  std::vector<coord_wire::InstanceInfo> Instances() const;
  // True while `label` runs here (active), with its generation.
  std::optional<Generation> ActiveGeneration(const std::string& label) const;
  // The generation the active instance of `label` started under (a re-grant
  // changes ActiveGeneration, not this): it names the instance's lifetime.
  std::optional<Generation> StartedGeneration(const std::string& label) const;
  Generation KnownGeneration(const std::string& label) const;
  std::uint64_t report_seq() const { return report_seq_; }
  bool Gated() const;  // quorum held for stabilize_ms

 private:
  struct Waiter {
    Address to;
    std::uint64_t request_id = 0;
    Generation generation;
  };
  struct Instance {
    Generation generation;
    SpecKind kind = SpecKind::kActor;
    std::string actor_type;
    std::string state;
    coord_wire::InstancePhase phase = coord_wire::InstancePhase::kAcquiring;
    std::int64_t drain_ms = 0;
    std::int64_t drain_deadline = 0;
    Generation started_generation;  // the generation the factory was given
    bool stop_after_start = false;
    bool lease_lost = false;  // its lease ran out (recorded once, never renewed again)
    std::string stop_reason;
    std::vector<Waiter> spawn_waiters;
    std::vector<Waiter> stop_waiters;
  };

  void Spawn(const Address& from, const coord_wire::Command& c);
  void Stop(const Address& from, const coord_wire::Command& c);
  void BeginStop(const std::string& label, const std::string& reason);
  void StartGated();
  void StopAll(const std::string& reason);
  // Removes the instance and releases its lease; its spawn waiters get
  // `spawn_answer`, its stop waiters Ok.
  void Discard(std::map<std::string, Instance>::iterator it, const Status& spawn_answer);
  void Answer(const Waiter& w, coord_wire::Command::Op op, const std::string& label,
              const Status& status);
  void AnswerAll(std::vector<Waiter>& waiters, coord_wire::Command::Op op,
                 const std::string& label, const Status& status);
  void Changed() { dirty_ = true; ++report_seq_; }
  void SendReport(const Address& to);
  void ArmReport();
  void Record(const std::string& event, const std::string& label, Generation g,
              const std::string& reason);
  // The instance may run (start or keep running) under its lease at `now`.
  bool LeaseLeft(const std::string& label, std::int64_t now) const {
    return leases_.Until(label) - options_.stop_lead_ms > now;
  }
  void ArmExpiry();

  Env& env_;
  OwnerLeases& leases_;
  HostOptions options_;
  HostHooks hooks_;
  std::set<std::string> types_;
  std::vector<AgentFamily> families_;
  std::map<std::string, Instance> instances_;
  std::map<std::string, Generation> known_;
  // The highest generation whose instance started here and ended: never again
  // (every instance lifetime has a generation of its own).
  std::map<std::string, Generation> ran_;
  // RaiseFloor, reported; a label's floor is dropped once a spawn above it is
  // accepted (it served its purpose) or once it went out in kFloorReports
  // reports, so reports stay small (at most kFloorReportBytes of floors).
  struct Floor {
    Generation generation;
    int reports = 0;
  };
  static constexpr int kFloorReports = 5;
  static constexpr std::size_t kFloorReportBytes = 32 * 1024;
  std::map<std::string, Floor> floors_;
  void DropFloorBelow(const std::string& label, Generation accepted);
  std::uint32_t term_floor_ = 0;
  bool has_quorum_ = false;
  std::int64_t quorum_since_ = 0;
  std::optional<Address> leader_;
  std::uint64_t incarnation_ = 0;
  std::uint64_t report_seq_ = 1;
  bool dirty_ = true;
  bool shutdown_ = false;
  bool leaving_ = false;
  std::optional<Env::TimerId> report_timer_;
  std::optional<Env::TimerId> gate_timer_;
  std::optional<Env::TimerId> expiry_timer_;
  std::optional<std::int64_t> expiry_at_;
};

}  // namespace pynenc_cpp::cluster
