// Mailer: actor messages of one node (docs/cluster/actors.md, "Delivery").
//
// To a label (a singleton), sender side: every message gets the next sequence
// number of (this process, label) and waits in the label's outbox until the
// owner acknowledges it. The outbox sends to the owner the directory names
// (only once it is running): first one message (a probe), then up to `window`
// in flight once that owner acknowledged one. When the owner changes, answers
// "not here", or leaves a message unacknowledged for resend_ms, every
// unacknowledged message is sent again, in order, starting with a probe. While
// no owner runs the label, messages wait (at most buffer_limit per label; a
// send beyond it is refused, counted, and the caller told: never silently).
//
// Receiver side: a message for a label this node runs (host active) goes to
// the inbox once: per sender and instance, a seq already handled is
// acknowledged as a duplicate, one already handed over is ignored (its answer
// will come), one out of order is answered "not here" (the sender then re-sends
// in order); the actor runtime acknowledges each one after handling it. A
// message for a label not running here is answered "not here".
//
// To a node-local path: one frame, at most once (replies of asks).
//
// Thread safety: Enqueue, Stats and the buffered counts are safe from any
// thread (one mutex); everything else runs on the Env loop thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cluster/actors/inbox.h"
#include "pynenc_cpp/core/thread_annotations.h"
#include "cluster/singletons/host.h"
#include "cluster/coordinator/messages.h"
#include "cluster/coordinator/router.h"
#include "pynenc_cpp/cluster/actors.h"
#include "pynenc_cpp/cluster/env.h"

namespace pynenc_cpp::cluster {

struct MailerOptions {
  std::size_t buffer_limit = 1'000;  // per label: messages not yet acknowledged
  std::size_t window = 256;          // envelopes in flight per label to an owner that answered
  std::int64_t retry_ms = 100;       // no owner, or "not here": look again after this
  std::int64_t resend_ms = 2'000;    // unacknowledged this long: sent again (from the oldest)
  std::uint64_t sender_epoch = 0;    // 0: random (distinguishes a restarted process)
};

class Mailer {
 public:
  // `inbox` may be null: no actor runtime in this process (every label message
  // is answered "not here", path messages are dropped and counted).
  Mailer(Env& env, Router& router, Host& host, Inbox* inbox, MailerOptions options);
  ~Mailer();
  Mailer(const Mailer&) = delete;
  Mailer& operator=(const Mailer&) = delete;

  // Any thread: accepts `payload` for `label` (REQUIRES: then call Pump(label)
  // on the loop thread). Returns its sequence number, or kResourceExhausted
  // "buffer for '<label>' is full (<n> messages waiting)" (nothing queued).
  Result<std::uint64_t> Enqueue(const std::string& label, std::string payload);
  // Loop thread: sends what the label's outbox can send now.
  void Pump(const std::string& label);
  void PumpAll();

  // Loop thread.
  void SendPath(const Address& to, const std::string& path, std::string payload);
  void OnPath(const coord_wire::PathMessage& m);
  void OnEnvelope(const Address& from, const coord_wire::LabelEnvelope& e);
  void OnAck(const coord_wire::LabelAck& a);
  // The actor runtime handled the kLabel item `token` (loop thread).
  void AckToken(std::uint64_t token, LabelOutcome outcome);
  // After every event: re-pumps when the directory changed.
  void AfterEvent();

  ActorMailStats Stats() const;
  std::uint64_t sender_epoch() const { return options_.sender_epoch; }

 private:
  struct Out {
    std::uint64_t seq = 0;
    std::string payload;
    bool sent = false;
    std::int64_t sent_at = 0;
  };
  struct Outbox {
    std::deque<Out> queue;  // unacknowledged, by seq
    std::optional<Address> target;
    bool probing = true;
    std::int64_t hold_until = 0;  // after "not here": wait before sending again
    std::optional<Env::TimerId> timer;
    std::int64_t timer_at = 0;
  };
  // Receiver state per (label, sender address, sender epoch), for one instance.
  struct Peer {
    Generation instance;          // the instance's start generation
    std::uint64_t handed = 0;     // highest seq handed to the inbox
    std::uint64_t processed = 0;  // highest seq acknowledged as handled
  };
  struct Token {
    std::string label;
    Address from;
    std::uint64_t epoch = 0;
    std::uint64_t seq = 0;
  };
  void Arm(const std::string& label, Outbox& ob, std::int64_t at);
  void Reply(const Address& to, const coord_wire::LabelEnvelope& e, LabelOutcome outcome);

  Env& env_;
  Router& router_;
  Host& host_;
  Inbox* inbox_;
  MailerOptions options_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  mutable Mutex mu_;
  // Enqueued, not yet in an outbox.
  std::map<std::string, std::vector<Out>> staged_ PYNENC_GUARDED_BY(mu_);
  std::map<std::string, std::size_t> counts_ PYNENC_GUARDED_BY(mu_);  // staged + outbox
  std::map<std::string, std::uint64_t> next_seq_ PYNENC_GUARDED_BY(mu_);
  ActorMailStats stats_ PYNENC_GUARDED_BY(mu_);

  std::map<std::string, Outbox> outboxes_;                                      // loop thread
  std::map<std::tuple<std::string, Address, std::uint64_t>, Peer> peers_;        // loop thread
  std::map<std::uint64_t, Token> tokens_;                                        // loop thread
  std::uint64_t next_token_ = 1;
  std::uint64_t directory_seen_ = 0;
};

}  // namespace pynenc_cpp::cluster
