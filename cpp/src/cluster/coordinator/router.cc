#include "cluster/coordinator/router.h"

#include <utility>

namespace pynenc_cpp::cluster {

using coord_wire::ActorMessage;
using coord_wire::ActorReply;
using coord_wire::ClientReply;
using coord_wire::ClientRequest;

Router::Router(Env& env, RouterOptions options, RouterHooks hooks)
    : env_(env), options_(std::move(options)), hooks_(std::move(hooks)) {}

Router::~Router() {
  *alive_ = false;
  for (auto* table : {&requests_, &asks_}) {
    auto pending = std::move(*table);
    table->clear();
    for (auto& [id, p] : pending) {
      env_.Cancel(p.timer);
      p.done(Status::Unavailable("the node stopped"));
    }
  }
}

void Router::SetLeader(std::optional<NodeId> id, std::optional<Address> address) {
  leader_id_ = std::move(id);
  leader_address_ = std::move(address);
}

std::uint64_t Router::AddPending(std::map<std::uint64_t, Pending>& table, Done done,
                                 std::int64_t timeout_ms, std::string what) {
  const std::uint64_t id = next_id_++;
  if (timeout_ms <= 0) timeout_ms = options_.request_timeout_ms;
  std::weak_ptr<bool> alive = alive_;
  const Env::TimerId timer =
      env_.After(timeout_ms, [this, alive, &table, id, timeout_ms, what = std::move(what)] {
        if (!alive.lock()) return;
        auto it = table.find(id);
        if (it == table.end()) return;
        Done d = std::move(it->second.done);
        std::optional<Status> refusal = std::move(it->second.last_refusal);
        table.erase(it);
        d(refusal ? *refusal
                  : Status::Timeout(what + ": no answer within " + std::to_string(timeout_ms) +
                                    " ms"));
      });
  Pending p;
  p.done = std::move(done);
  p.timer = timer;
  table[id] = std::move(p);
  return id;
}

void Router::Finish(std::map<std::uint64_t, Pending>& table, Env& env, std::uint64_t id,
                    Result<std::string> result) {
  auto it = table.find(id);
  if (it == table.end()) return;  // timed out already
  env.Cancel(it->second.timer);
  Done d = std::move(it->second.done);
  table.erase(it);
  d(std::move(result));
}

void Router::Request(coord_wire::ClientOp op, std::string body, std::int64_t timeout_ms,
                     Done done) {
  if (timeout_ms <= 0) timeout_ms = options_.request_timeout_ms;
  const std::uint64_t id = AddPending(requests_, std::move(done), timeout_ms, "coordinator");
  Pending& p = requests_[id];
  p.op = op;
  p.body = std::move(body);
  p.deadline_ms = env_.NowMs() + timeout_ms;
  Attempt(id);
}

void Router::Attempt(std::uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Pending& p = it->second;
  if (coordinator_) {
    std::weak_ptr<bool> alive = alive_;
    coordinator_->HandleClient(ClientRequest{id, p.op, p.body},
                               [this, alive, id](const Status& s, std::string reply) {
                                 if (alive.lock()) OnResult(id, s, std::move(reply));
                               });
    return;
  }
  if (!leader_address_) {
    return OnResult(id, Status::Unavailable("no leader: this node sees no elected leader with quorum"),
                    "");
  }
  auto [type, payload] = coord_wire::Encode(ClientRequest{id, p.op, p.body});
  env_.Send(*leader_address_, type, std::move(payload));
}

void Router::OnResult(std::uint64_t id, const Status& status, std::string body) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;  // answered or timed out already
  if (status.code() == ErrorCode::kUnavailable &&
      env_.NowMs() + options_.retry_ms < it->second.deadline_ms) {
    it->second.last_refusal = status;  // no leader yet, or a leader not ready: retry
    std::weak_ptr<bool> alive = alive_;
    env_.After(options_.retry_ms, [this, alive, id] {
      if (alive.lock()) Attempt(id);
    });
    return;
  }
  Finish(requests_, env_, id,
         status.ok() ? Result<std::string>(std::move(body)) : Result<std::string>(status));
}

void Router::OnClientRequest(const Address& from, const ClientRequest& request) {
  auto answer = [this, from, id = request.id](const Status& s, std::string body) {
    auto [type, payload] = coord_wire::Encode(ClientReply{id, s.code(), s.message(), std::move(body)});
    env_.Send(from, type, std::move(payload));
  };
  if (!coordinator_) {
    return answer(Status::Unavailable("node " + options_.self_id.substr(0, 8) +
                                      " is not the leader (it sees " +
                                      (leader_id_ ? leader_id_->substr(0, 8) : "none") + ")"),
                  "");
  }
  coordinator_->HandleClient(request, answer);
}

void Router::OnClientReply(const ClientReply& reply) {
  OnResult(reply.id, Status::FromCode(reply.code, reply.message), reply.body);
}

void Router::OnDirectory(const Address& from, const coord_wire::Directory& chunk) {
  if (!leader_address_ || from != *leader_address_) return;  // only the leader we see
  if (chunk.reign == reign_ && chunk.version <= version_) return;  // not newer
  if (chunk.reign != assembling_reign_ || chunk.version != assembling_version_) {
    if (chunk.reign == assembling_reign_ && chunk.version < assembling_version_) return;
    assembling_.clear();
    assembling_reign_ = chunk.reign;
    assembling_version_ = chunk.version;
  }
  assembling_[chunk.chunk] = chunk;
  if (assembling_.size() < chunk.chunks) return;
  directory_.clear();
  for (auto& [i, c] : assembling_) {
    for (auto& e : c.entries) directory_[e.label] = std::move(e);
  }
  reign_ = assembling_reign_;
  version_ = assembling_version_;
  assembling_.clear();
  ++directory_updates_;
}

std::optional<coord_wire::DirectoryEntry> Router::Lookup(const std::string& label) const {
  auto it = directory_.find(label);
  if (it == directory_.end()) return std::nullopt;
  return it->second;
}

std::vector<coord_wire::DirectoryEntry> Router::Entries() const {
  std::vector<coord_wire::DirectoryEntry> out;
  for (const auto& [label, e] : directory_) out.push_back(e);
  return out;
}

void Router::Ask(const std::string& label, std::string payload, bool expects_reply,
                 std::int64_t timeout_ms, Done done) {
  auto entry = Lookup(label);
  if (!entry || entry->owner_address.empty() || entry->state != SpecState::kRunning) {
    std::string why = !entry ? "unknown to this node's directory"
                             : std::string(SpecStateName(entry->state)) +
                                   (entry->reason.empty() ? "" : ": " + entry->reason);
    return done(Status::Unavailable("'" + label + "' is not running (" + why + ")"));
  }
  if (entry->owner == options_.self_id) {
    if (!expects_reply) {
      hooks_.deliver(label, std::move(payload), [](Result<std::string>) {});
      return done(std::string());
    }
    const std::uint64_t id = AddPending(asks_, std::move(done), timeout_ms, "'" + label + "'");
    std::weak_ptr<bool> alive = alive_;
    hooks_.deliver(label, std::move(payload), [this, alive, id](Result<std::string> r) {
      if (alive.lock()) Finish(asks_, env_, id, std::move(r));
    });
    return;
  }
  std::uint64_t id = 0;
  if (expects_reply) {
    id = AddPending(asks_, std::move(done), timeout_ms,
                    "'" + label + "' on " + entry->owner.substr(0, 8));
  }
  auto [type, bytes] = coord_wire::Encode(ActorMessage{id, label, expects_reply, std::move(payload)});
  env_.Send(entry->owner_address, type, std::move(bytes));
  if (!expects_reply) done(std::string());
}

void Router::OnActorMessage(const Address& from, const ActorMessage& message) {
  std::weak_ptr<bool> alive = alive_;
  const bool reply = message.expects_reply;
  hooks_.deliver(message.label, message.payload,
                 [this, alive, from, id = message.id, reply](Result<std::string> r) {
                   if (!reply || !alive.lock()) return;
                   ActorReply out;
                   out.id = id;
                   if (r.ok()) {
                     out.payload = std::move(r).value();
                   } else {
                     out.code = r.status().code();
                     out.message = r.status().message();
                   }
                   auto [type, payload] = coord_wire::Encode(out);
                   env_.Send(from, type, std::move(payload));
                 });
}

void Router::OnActorReply(const ActorReply& reply) {
  Finish(asks_, env_, reply.id,
         reply.code == ErrorCode::kOk
             ? Result<std::string>(reply.payload)
             : Result<std::string>(Status::FromCode(reply.code, reply.message)));
}

}  // namespace pynenc_cpp::cluster
