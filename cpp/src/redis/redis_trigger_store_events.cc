// Redis trigger store: events, their lex-ordered indexes and the event ->
// invocation links.
#include <algorithm>
#include <limits>

#include "redis/redis_trigger_store_impl.h"

namespace pynenc_cpp {
namespace redis_trigger {
namespace {

using redis::Value;

// KEYS[1] lex index (OrderKey + id), KEYS[2] event hash; ARGV: min, max, links
// key prefix. Returns (id, encoded row or '', linked 0/1) per member, oldest first.
const redis::Script kEventWindow(R"lua(
local m = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2])
local out = {}
for _, mem in ipairs(m) do
  local id = string.sub(mem, 21)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
  out[#out + 1] = redis.call('EXISTS', ARGV[3] .. id)
end
return out
)lua");

}  // namespace

std::string EncodeEvent(const EventRow& row) {
  Writer w;
  w.Str(row.event_code);
  w.Int(row.timestamp_us);
  w.Str(row.json);
  w.Str(row.matched ? "1" : "0");
  w.Opt(row.emitted_by_invocation_id);
  w.Opt(row.emitted_by_task_id);
  w.Opt(row.emitted_by_runner_context_id);
  return w.Take();
}

bool DecodeEvent(const std::string& id, const std::string& blob, EventRow* row) {
  Reader r(blob);
  std::string matched;
  row->event_id = id;
  if (!(r.Str(&row->event_code) && r.Int(&row->timestamp_us) && r.Str(&row->json) &&
        r.Str(&matched) && r.Opt(&row->emitted_by_invocation_id) &&
        r.Opt(&row->emitted_by_task_id) && r.Opt(&row->emitted_by_runner_context_id) && r.Done())) {
    return false;
  }
  row->matched = matched == "1";
  return true;
}

void RedisTriggerStore::AddEventOps(const EventRow& row, const std::string& blob, Change* c) const {
  const std::string m = EventMember(row);
  c->Op({"HSET", K(redis::keys::kEv), row.event_id, blob});
  c->Op({"ZADD", K(redis::keys::kEvTime), "0", m});
  c->Op({"ZADD", K(redis::keys::kEvCode + row.event_code), "0", m});
  if (row.emitted_by_invocation_id) {
    c->Op({"ZADD", K(redis::keys::kEvEmit + *row.emitted_by_invocation_id), "0", m});
  }
  c->Op({"HINCRDEL", K(redis::keys::kEvCodes), row.event_code, "1"});
}

void RedisTriggerStore::RemoveEventOps(const EventRow& row, const std::string& blob,
                                       Change* c) const {
  const std::string m = EventMember(row);
  c->guards.push_back({K(redis::keys::kEv), row.event_id, blob});
  c->Op({"HDEL", K(redis::keys::kEv), row.event_id});
  c->Op({"ZREM", K(redis::keys::kEvTime), m});
  c->Op({"ZREM", K(redis::keys::kEvCode + row.event_code), m});
  if (row.emitted_by_invocation_id) {
    c->Op({"ZREM", K(redis::keys::kEvEmit + *row.emitted_by_invocation_id), m});
  }
  c->Op({"HINCRDEL", K(redis::keys::kEvCodes), row.event_code, "-1"});
}

Status RedisTriggerStore::StoreEvent(const EventRow& event) {
  const std::string blob = EncodeEvent(event);
  return ApplyWithRetry([&]() -> Result<Change> {
    Result<Value> old = Cmd({"HGET", K(redis::keys::kEv), event.event_id});
    if (!old.ok()) return old.status();
    Change c;
    if (old.value().is_nil()) {
      c.guards.push_back({K(redis::keys::kEv), event.event_id, std::nullopt});
    } else {
      EventRow prev;
      if (!DecodeEvent(event.event_id, old.value().str, &prev)) {
        return Status::BackendFailure("redis trigger store: undecodable event " + event.event_id);
      }
      RemoveEventOps(prev, old.value().str, &c);  // links are kept
    }
    AddEventOps(event, blob, &c);
    for (const std::string& inv : event.triggered_invocation_ids) {
      c.Op({"ZADDSEQ", K(redis::keys::kLinks + event.event_id), inv, K(redis::keys::kSeq)});
    }
    return c;
  });
}

Result<std::vector<std::vector<std::string>>> RedisTriggerStore::LinksOf(
    const std::vector<std::string>& event_ids) {
  std::vector<std::vector<std::string>> out;
  if (event_ids.empty()) return out;
  std::vector<std::vector<std::string>> cmds;
  for (const std::string& id : event_ids)
    cmds.push_back({"ZRANGE", K(redis::keys::kLinks + id), "0", "-1"});
  Result<std::vector<Value>> replies = client_->Pipeline(cmds);
  if (!replies.ok()) return replies.status();
  for (const Value& v : replies.value()) {
    if (v.is_error()) return Status::BackendFailure("redis ZRANGE failed: " + v.str);
    std::vector<std::string> ids;
    for (const Value& e : v.elements) ids.push_back(e.str);
    out.push_back(std::move(ids));
  }
  return out;
}

Result<std::optional<StoredEvent>> RedisTriggerStore::GetEvent(const std::string& event_id) {
  Result<std::vector<Value>> replies =
      client_->Pipeline({{"HGET", K(redis::keys::kEv), event_id},
                         {"ZRANGE", K(redis::keys::kLinks + event_id), "0", "-1"}});
  if (!replies.ok()) return replies.status();
  const Value& row = replies.value()[0];
  const Value& links = replies.value()[1];
  if (row.is_error() || links.is_error()) {
    return Status::BackendFailure("redis GetEvent failed: " + row.str + links.str);
  }
  if (row.is_nil()) return std::optional<StoredEvent>();
  EventRow decoded;
  if (!DecodeEvent(event_id, row.str, &decoded)) {
    return Status::BackendFailure("redis trigger store: undecodable event " + event_id);
  }
  StoredEvent out{decoded.json, {}};
  for (const Value& e : links.elements) out.triggered_invocation_ids.push_back(e.str);
  return std::optional<StoredEvent>(std::move(out));
}

Result<std::vector<RedisTriggerStore::WindowEvent>> RedisTriggerStore::EventWindow(
    const EventFilter& f) {
  std::string index = K(redis::keys::kEvTime);
  if (f.emitted_by_invocation_id) {
    index = K(redis::keys::kEvEmit + *f.emitted_by_invocation_id);
  } else if (f.event_code) {
    index = K(redis::keys::kEvCode + *f.event_code);
  }
  const std::string min = f.start_us ? "[" + OrderKey(*f.start_us) : "-";
  std::string max = "+";
  if (f.end_us && *f.end_us < std::numeric_limits<TimestampUs>::max()) {
    max = "(" + OrderKey(*f.end_us + 1);
  }
  Result<Value> r =
      client_->Eval(kEventWindow, {index, K(redis::keys::kEv)}, {min, max, K(redis::keys::kLinks)});
  if (!r.ok()) return r.status();
  if (r.value().is_error()) {
    return Status::BackendFailure("redis event window script failed: " + r.value().str);
  }
  const auto& els = r.value().elements;
  std::vector<WindowEvent> out;
  for (std::size_t i = 0; i + 2 < els.size(); i += 3) {
    if (els[i + 1].str.empty()) continue;  // defensive: index and row are written together
    WindowEvent ev;
    if (!DecodeEvent(els[i].str, els[i + 1].str, &ev.row)) {
      return Status::BackendFailure("redis trigger store: undecodable event " + els[i].str);
    }
    ev.triggered = els[i + 2].integer != 0;
    out.push_back(std::move(ev));
  }
  return out;
}

bool RedisTriggerStore::Matches(const WindowEvent& ev, const EventFilter& f) {
  return EventMatches(ev.row, f, [&] { return ev.triggered; });
}

Result<std::vector<StoredEvent>> RedisTriggerStore::GetEvents(const EventFilter& filter,
                                                              std::int64_t limit,
                                                              std::int64_t offset) {
  if (Status s = CheckPage(limit, offset); !s.ok()) return s;
  Result<std::vector<WindowEvent>> window = EventWindow(filter);
  if (!window.ok()) return window.status();
  std::vector<const EventRow*> page;
  std::int64_t skipped = 0;
  for (auto it = window.value().rbegin();
       it != window.value().rend() && static_cast<std::int64_t>(page.size()) < limit; ++it) {
    if (!Matches(*it, filter)) continue;
    if (skipped < offset) {
      ++skipped;
      continue;
    }
    page.push_back(&it->row);
  }
  std::vector<std::string> ids;
  for (const EventRow* row : page) ids.push_back(row->event_id);
  Result<std::vector<std::vector<std::string>>> links = LinksOf(ids);
  if (!links.ok()) return links.status();
  std::vector<StoredEvent> out;
  for (std::size_t i = 0; i < page.size(); ++i) {
    out.push_back({page[i]->json, std::move(links.value()[i])});
  }
  return out;
}

Result<std::int64_t> RedisTriggerStore::CountEvents(const EventFilter& filter) {
  Result<std::vector<WindowEvent>> window = EventWindow(filter);
  if (!window.ok()) return window.status();
  return static_cast<std::int64_t>(
      std::count_if(window.value().begin(), window.value().end(),
                    [&](const WindowEvent& ev) { return Matches(ev, filter); }));
}

Result<EventMarkerPage> RedisTriggerStore::EventMarkers(
    TimestampUs start_us, TimestampUs end_us, const std::optional<std::string>& event_code,
    EventMarkerState state, std::int64_t limit, std::int64_t offset) {
  if (Status s = CheckPage(limit, offset); !s.ok()) return s;
  const EventFilter filter = MarkerFilter(start_us, end_us, event_code, state);
  EventMarkerPage page;
  if (start_us > end_us) return page;
  Result<std::vector<WindowEvent>> window = EventWindow(filter);
  if (!window.ok()) return window.status();
  for (const WindowEvent& ev : window.value()) {
    if (!Matches(ev, filter)) continue;
    const std::int64_t index = page.total++;
    if (index < offset || index >= offset + limit) continue;
    const EventRow& row = ev.row;
    page.markers.push_back({row.event_id, row.event_code, row.timestamp_us, row.matched,
                            ev.triggered, row.emitted_by_invocation_id,
                            row.emitted_by_runner_context_id});
  }
  page.truncated = offset + static_cast<std::int64_t>(page.markers.size()) < page.total;
  return page;
}

Result<std::vector<std::string>> RedisTriggerStore::EventCodes() {
  Result<Value> r = Cmd({"HKEYS", K(redis::keys::kEvCodes)});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const Value& v : r.value().elements) out.push_back(v.str);
  std::sort(out.begin(), out.end());
  return out;
}

Status RedisTriggerStore::LinkTriggerRunToEvents(const std::vector<std::string>& event_ids,
                                                 const std::string& invocation_id,
                                                 const std::string& trigger_run_id) {
  (void)trigger_run_id;  // runs are found through their own indexes
  if (event_ids.empty()) return Status::Ok();
  Change c;
  for (const std::string& id : event_ids) {
    c.Op({"ZADDSEQ", K(redis::keys::kLinks + id), invocation_id, K(redis::keys::kSeq)});
  }
  Result<bool> r = Apply(c);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<std::string>> RedisTriggerStore::InvocationsTriggeredByEvent(
    const std::string& event_id) {
  return ZMembers(K(redis::keys::kLinks + event_id));
}

// ---- Event retention -------------------------------------------------------

Status RedisTriggerStore::DeleteEvents(const std::vector<std::string>& ids) {
  if (ids.empty()) return Status::Ok();
  return ApplyWithRetry([&]() -> Result<Change> {
    Result<std::vector<std::optional<std::string>>> blobs = HMGet(K(redis::keys::kEv), ids);
    if (!blobs.ok()) return blobs.status();
    Change c;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (blobs.value()[i]) {
        EventRow row;
        if (!DecodeEvent(ids[i], *blobs.value()[i], &row)) {
          return Status::BackendFailure("redis trigger store: undecodable event " + ids[i]);
        }
        RemoveEventOps(row, *blobs.value()[i], &c);
      }
      c.Op({"DEL", K(redis::keys::kLinks + ids[i])});
    }
    return c;
  });
}

Result<std::vector<std::string>> RedisTriggerStore::AgePurgeEvents(TimestampUs threshold_us) {
  Result<Value> r =
      Cmd({"ZRANGEBYLEX", K(redis::keys::kEvTime), "-", "(" + OrderKey(threshold_us)});
  if (!r.ok()) return r.status();
  std::vector<std::string> ids;
  for (const Value& v : r.value().elements) ids.push_back(v.str.substr(kOrderKeyLen));
  if (Status s = DeleteEvents(ids); !s.ok()) return s;
  return ids;
}

Result<std::vector<std::string>> RedisTriggerStore::CapPurgeEvents(std::int64_t max_records) {
  std::vector<std::string> ids;
  if (max_records <= 0) return ids;
  Result<Value> n = Cmd({"ZCARD", K(redis::keys::kEvTime)});
  if (!n.ok()) return n.status();
  if (n.value().integer <= max_records) return ids;
  Result<Value> r = Cmd({"ZRANGE", K(redis::keys::kEvTime), "0",
                         std::to_string(n.value().integer - max_records - 1)});
  if (!r.ok()) return r.status();
  for (const Value& v : r.value().elements) ids.push_back(v.str.substr(kOrderKeyLen));
  if (Status s = DeleteEvents(ids); !s.ok()) return s;
  std::reverse(ids.begin(), ids.end());
  return ids;
}

}  // namespace redis_trigger
}  // namespace pynenc_cpp
