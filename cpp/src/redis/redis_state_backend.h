// Factory of the Redis state backend (concrete class in redis_state_backend.cc)
// and app-info discovery for a redis:// server.
//
// Key layout (P = redis::KeyPrefix(app_id, "state") = "pynenc:{app}:state:"):
//   P inv:<id>            hash  seq, rec (packed InvocationRecord), parent, event,
//                               wfid, wftype (index fields, absent when unset)
//   P ix:parent:<id>      zset  invocation ids scored by first-upsert seq
//   P ix:event:<ev>       zset  idem, by parent event
//   P ix:wf:<wfid>        zset  idem, by workflow id
//   P ix:wftype:<type>    zset  idem, by workflow type
//   P ix:wfany            zset  idem, every invocation that has a workflow
//   P seq / P hseq        counters (kept by Purge, so orders never go back)
//   P hkey:<id>           hash  "<ts>:<status>" (the replace-in-place key) ->
//                               pos + "<status>|<json>": one invocation's history,
//                               read sorted; pos = 16 hex of the timestamp (sign
//                               bit flipped) + 16 hex of hseq
//   P htime               zset  score 0, member pos+id: lexicographic = total order
//   P layout              "2" once the keys of layout 1 are gone (the P hinv:<id>
//                               zsets of pos, which duplicated hkey:<id>; unlinked
//                               by one SCAN when a state backend is opened)
//   P hist                hash  (layout 1) pos -> value of an entry whose hkey
//                               field holds pos alone; still read, emptied as
//                               entries are replaced, never written anew
//   P results / P exceptions / P runners     hashes by invocation / runner id
//   P wfruns / P wftype_of                   hashes workflow id -> packed run / type
//   P wfruns_t:<type>     set   workflow ids of one type;  P wftypes  set of types
//   P wfsub:<wf>          zset  sub-invocations scored by first-store seq
//   P wfdata:<wf>         hash  key -> value
//   pynenc:app_infos      hash  app_id -> AppInfo JSON, one per server (discovery)
// Every key of an app shares one Cluster slot (the {app} hash tag); the Lua
// scripts touch keys they derive from stored index fields, which is fine within
// one slot.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pynenc_cpp/ports/state_backend.h"
#include "redis/redis_client.h"

namespace pynenc_cpp::redis {

// Returns a state backend for `config.app_id` on `client`'s server.
// Thread-safe and process-safe: every write is one Lua script or one command, so
// it is atomic against every other caller; every batch (UpsertInvocations,
// AddHistories) is one round trip. Reads that need several keys run as one
// read-only script, so they see one consistent state. Failures to reach the
// server are kBackendFailure naming host:port; unexpected Redis error replies are
// kBackendFailure with the server's message.
Result<std::unique_ptr<StateBackend>> NewRedisStateBackend(std::shared_ptr<Client> client,
                                                           const BackendConfig& config);

// Layout helpers for scripts of other modules that write state-backend keys
// (redis/redis_lifecycle_scripts.cc): the first 16 hex digits of a history position
// for timestamp `ts`, the stored value of a history entry ("<status>|<json>"),
// and the decoder of the `rec` field of P inv:<id> (nullopt if malformed).
std::string HistoryPositionPrefix(TimestampUs ts);
std::string HistoryValue(const HistoryRecord& r);
std::optional<InvocationRecord> ParseInvocationRecord(const std::string& packed);
// The state backend's Lua writes, shared so that each lives in one place:
// state_upsert(sp, id, rec, parent, event, wfid, wftype) and
// state_add_history(sp, id, tsenc, dk, val) (documented in
// redis_state_backend_scripts.cc).
const char* StateLuaFragments();
// The five ARGV fields of state_upsert for `r` (rec, parent, event, wfid, wftype).
std::vector<std::string> UpsertFields(const InvocationRecord& r);

// Every (app_id, app_info_json) registered on `client`'s server, ascending by app id.
Result<std::vector<std::pair<std::string, std::string>>> RedisDiscoverAppInfos(
    const std::shared_ptr<Client>& client);

}  // namespace pynenc_cpp::redis
