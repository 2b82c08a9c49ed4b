// Router: what every node does for requests that are not its own to decide.
//  * Client requests (submit, remove, view, statuses) go to the Coordinator:
//    this node's own while it leads, else forwarded to the leader its view
//    elects. A node that is not the leader (or not yet: elected, still
//    stabilizing) refuses forwarded requests with kUnavailable naming the leader
//    it sees; the asking node retries every retry_ms while there is no leader or
//    the leader refuses, until timeout_ms, then answers the last kUnavailable
//    (or kTimeout if the leader never answered). Submissions are idempotent, so
//    a retried one that was applied before is harmless.
//  * The directory: every node keeps the leader's latest directory (where each
//    label runs, its state, its spec), assembled from chunks, replaced as a
//    whole per version; only frames from the leader this node sees count.
//  * Actor messages: to the node the directory names as the label's owner; the
//    receiving node delivers only to an instance it runs.
// Every request gets exactly one answer; destroying the Router answers the
// pending ones with kUnavailable.
//
// Thread safety: not thread-safe; lives on the Env loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/coordinator/coordinator.h"
#include "cluster/coordinator/messages.h"
#include "pynenc_cpp/cluster/env.h"

namespace pynenc_cpp::cluster {

struct RouterOptions {
  NodeId self_id;
  std::int64_t request_timeout_ms = 5'000;
  std::int64_t retry_ms = 100;
};

struct RouterHooks {
  using ReplyFn = std::function<void(Result<std::string>)>;
  // A message for `label`, which this node should run: answer with `reply` on
  // the loop thread (kUnavailable if it does not run here).
  std::function<void(const std::string& label, std::string payload, ReplyFn reply)> deliver;
};

class Router {
 public:
  using Done = std::function<void(Result<std::string>)>;

  Router(Env& env, RouterOptions options, RouterHooks hooks);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  void SetLeader(std::optional<NodeId> id, std::optional<Address> address);
  // This node's own Coordinator while it leads (nullptr otherwise).
  void SetCoordinator(Coordinator* coordinator) { coordinator_ = coordinator; }

  // Sends a client request to the Coordinator; `done` gets the reply body or
  // the error. timeout_ms <= 0: the default.
  void Request(coord_wire::ClientOp op, std::string body, std::int64_t timeout_ms, Done done);
  void OnClientRequest(const Address& from, const coord_wire::ClientRequest& request);
  void OnClientReply(const coord_wire::ClientReply& reply);

  void OnDirectory(const Address& from, const coord_wire::Directory& chunk);
  std::optional<coord_wire::DirectoryEntry> Lookup(const std::string& label) const;
  std::vector<coord_wire::DirectoryEntry> Entries() const;
  // Grows every time a complete directory replaced the previous one.
  std::uint64_t directory_updates() const { return directory_updates_; }

  // Sends `payload` to the instance of `label`; with expects_reply, `done` gets
  // its answer (or an error); without, `done` is called once it was sent.
  void Ask(const std::string& label, std::string payload, bool expects_reply,
           std::int64_t timeout_ms, Done done);
  void OnActorMessage(const Address& from, const coord_wire::ActorMessage& message);
  void OnActorReply(const coord_wire::ActorReply& reply);

 private:
  struct Pending {
    Done done;
    Env::TimerId timer = 0;
    // Client requests: what to (re)send, until when.
    coord_wire::ClientOp op = coord_wire::ClientOp::kView;
    std::string body;
    std::int64_t deadline_ms = 0;
    std::optional<Status> last_refusal;
  };
  void Attempt(std::uint64_t id);
  void OnResult(std::uint64_t id, const Status& status, std::string body);
  std::uint64_t AddPending(std::map<std::uint64_t, Pending>& table, Done done,
                           std::int64_t timeout_ms, std::string what);
  static void Finish(std::map<std::uint64_t, Pending>& table, Env& env, std::uint64_t id,
                     Result<std::string> result);

  Env& env_;
  RouterOptions options_;
  RouterHooks hooks_;
  Coordinator* coordinator_ = nullptr;
  std::optional<NodeId> leader_id_;
  std::optional<Address> leader_address_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, Pending> requests_;
  std::map<std::uint64_t, Pending> asks_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Directory: the complete one, and the chunks of the version being assembled.
  std::map<std::string, coord_wire::DirectoryEntry> directory_;
  std::uint64_t reign_ = 0, version_ = 0;
  std::map<std::uint32_t, coord_wire::Directory> assembling_;
  std::uint64_t assembling_reign_ = 0, assembling_version_ = 0;
  std::uint64_t directory_updates_ = 0;
};

}  // namespace pynenc_cpp::cluster
