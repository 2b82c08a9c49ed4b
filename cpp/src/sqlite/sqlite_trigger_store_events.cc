// SQLite trigger store: events, their filtered queries and markers, and the
// event -> invocation links (trig_event_links; "triggered" = a link exists).
#include <variant>

#include "sqlite/sqlite_trigger_store_impl.h"

namespace pynenc_cpp {
namespace sqlite_trigger {
namespace {

using Param = std::variant<std::string, std::int64_t>;

// A WHERE clause over trig_events AS e with its positional parameters. Only the
// filters that are set appear in the SQL, so SQLite can pick an index for each
// combination (and each combination's statement is cached once).
struct EventWhere {
  std::string sql;
  std::vector<Param> params;

  void Add(const std::string& condition, Param value) {
    sql += " AND " + condition;
    params.push_back(std::move(value));
  }
  void Bind(Stmt& stmt) const {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      if (const auto* text = std::get_if<std::string>(&params[i])) {
        stmt.Bind(index, *text);
      } else {
        stmt.Bind(index, std::get<std::int64_t>(params[i]));
      }
    }
  }
};

constexpr const char* kLinked =
    "EXISTS (SELECT 1 FROM trig_event_links l WHERE l.app_id = e.app_id "
    "AND l.event_id = e.event_id)";

EventWhere BuildWhere(const std::string& app, const EventFilter& f) {
  EventWhere w;
  w.sql = "e.app_id = ?";
  w.params.push_back(app);
  if (f.event_code) w.Add("e.event_code = ?", *f.event_code);
  if (f.start_us) w.Add("e.timestamp_us >= ?", *f.start_us);
  if (f.end_us) w.Add("e.timestamp_us <= ?", *f.end_us);
  if (f.matched) w.Add("e.matched = ?", static_cast<std::int64_t>(*f.matched ? 1 : 0));
  if (f.emitted_by_invocation_id) {
    w.Add("e.emitted_by_invocation_id = ?", *f.emitted_by_invocation_id);
  }
  if (f.emitted_by_task_id) w.Add("e.emitted_by_task_id = ?", *f.emitted_by_task_id);
  if (f.triggered) w.sql += std::string(" AND ") + (*f.triggered ? "" : "NOT ") + kLinked;
  return w;
}

Result<std::int64_t> CountWhere(Conn& c, const EventWhere& w) {
  std::int64_t count = 0;
  Status s = ForEachRow(
      c, "SELECT count(*) FROM trig_events e WHERE " + w.sql, [&](Stmt& s) { w.Bind(s); },
      [&](Stmt& row) {
        count = row.Int(0);
        return Status::Ok();
      });
  if (!s.ok()) return s;
  return count;
}

}  // namespace

Result<std::vector<std::string>> SqliteTriggerStore::LinkedInvocationsTx(
    Conn& c, const std::string& event_id) {
  return Texts(c,
               "SELECT invocation_id FROM trig_event_links WHERE app_id = ?1 AND event_id = ?2 "
               "ORDER BY seq",
               [&](Stmt& s) { s.Bind(1, app_).Bind(2, event_id); });
}

Status SqliteTriggerStore::DeleteEventTx(Conn& c, const std::string& event_id) {
  auto bind = [&](Stmt& s) { s.Bind(1, app_).Bind(2, event_id); };
  if (Status s = Exec(c, "DELETE FROM trig_event_links WHERE app_id = ?1 AND event_id = ?2", bind);
      !s.ok()) {
    return s;
  }
  return Exec(c, "DELETE FROM trig_events WHERE app_id = ?1 AND event_id = ?2", bind);
}

Status SqliteTriggerStore::StoreEvent(const EventRow& event) {
  return db_->Write([&](Conn& c) -> Status {
    const TimestampUs now = clock_->NowMicros();
    Status s = Exec(
        c,
        "INSERT INTO trig_events (app_id, event_id, event_code, timestamp_us, json, matched, "
        "emitted_by_invocation_id, emitted_by_task_id, emitted_by_runner_context_id) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (app_id, event_id) DO UPDATE SET "
        "event_code = excluded.event_code, timestamp_us = excluded.timestamp_us, "
        "json = excluded.json, matched = excluded.matched, "
        "emitted_by_invocation_id = excluded.emitted_by_invocation_id, "
        "emitted_by_task_id = excluded.emitted_by_task_id, "
        "emitted_by_runner_context_id = excluded.emitted_by_runner_context_id",
        [&](Stmt& s) {
          s.Bind(1, app_).Bind(2, event.event_id).Bind(3, event.event_code);
          s.Bind(4, event.timestamp_us).Bind(5, event.json);
          s.Bind(6, static_cast<std::int64_t>(event.matched ? 1 : 0));
          s.Bind(7, event.emitted_by_invocation_id).Bind(8, event.emitted_by_task_id);
          s.Bind(9, event.emitted_by_runner_context_id);
        });
    if (!s.ok()) return s;
    for (const std::string& inv : event.triggered_invocation_ids) {
      s = Exec(c,
               "INSERT OR IGNORE INTO trig_event_links (app_id, event_id, invocation_id, "
               "trigger_run_id, linked_at_us) VALUES (?1, ?2, ?3, NULL, ?4)",
               [&](Stmt& s) { s.Bind(1, app_).Bind(2, event.event_id).Bind(3, inv).Bind(4, now); });
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

Result<std::optional<StoredEvent>> SqliteTriggerStore::GetEvent(const std::string& event_id) {
  std::optional<StoredEvent> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.reset();  // a retried transaction starts clean
    Status q = ForEachRow(
        c, "SELECT json FROM trig_events WHERE app_id = ?1 AND event_id = ?2",
        [&](Stmt& s) { s.Bind(1, app_).Bind(2, event_id); },
        [&](Stmt& row) {
          out = StoredEvent{row.Text(0), {}};
          return Status::Ok();
        });
    if (!q.ok() || !out) return q;
    Result<std::vector<std::string>> links = LinkedInvocationsTx(c, event_id);
    if (!links.ok()) return links.status();
    out->triggered_invocation_ids = std::move(links).value();
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<StoredEvent>> SqliteTriggerStore::GetEvents(const EventFilter& filter,
                                                               std::int64_t limit,
                                                               std::int64_t offset) {
  if (Status s = CheckPage(limit, offset); !s.ok()) return s;
  const EventWhere w = BuildWhere(app_, filter);
  std::vector<StoredEvent> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.clear();
    std::vector<std::string> ids;
    const int n = static_cast<int>(w.params.size());
    Status q = ForEachRow(
        c,
        "SELECT e.event_id, e.json FROM trig_events e WHERE " + w.sql +
            " ORDER BY e.timestamp_us DESC, e.event_id DESC LIMIT ? OFFSET ?",
        [&](Stmt& s) {
          w.Bind(s);
          s.Bind(n + 1, limit).Bind(n + 2, offset);
        },
        [&](Stmt& row) {
          ids.push_back(row.Text(0));
          out.push_back({row.Text(1), {}});
          return Status::Ok();
        });
    if (!q.ok()) return q;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      Result<std::vector<std::string>> links = LinkedInvocationsTx(c, ids[i]);
      if (!links.ok()) return links.status();
      out[i].triggered_invocation_ids = std::move(links).value();
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::int64_t> SqliteTriggerStore::CountEvents(const EventFilter& filter) {
  const EventWhere w = BuildWhere(app_, filter);
  Result<std::int64_t> count = std::int64_t{0};
  Status s = db_->Read([&](Conn& c) {
    count = CountWhere(c, w);
    return count.status();
  });
  if (!s.ok()) return s;
  return count;
}

Result<EventMarkerPage> SqliteTriggerStore::EventMarkers(
    TimestampUs start_us, TimestampUs end_us, const std::optional<std::string>& event_code,
    EventMarkerState state, std::int64_t limit, std::int64_t offset) {
  if (Status s = CheckPage(limit, offset); !s.ok()) return s;
  const EventFilter filter = MarkerFilter(start_us, end_us, event_code, state);
  const EventWhere w = BuildWhere(app_, filter);
  EventMarkerPage page;
  Status s = db_->Read([&](Conn& c) -> Status {
    page = EventMarkerPage();
    Result<std::int64_t> total = CountWhere(c, w);
    if (!total.ok()) return total.status();
    page.total = total.value();
    const int n = static_cast<int>(w.params.size());
    return ForEachRow(
        c,
        std::string("SELECT e.event_id, e.event_code, e.timestamp_us, e.matched, ") + kLinked +
            ", e.emitted_by_invocation_id, e.emitted_by_runner_context_id FROM trig_events e "
            "WHERE " +
            w.sql + " ORDER BY e.timestamp_us, e.event_id LIMIT ? OFFSET ?",
        [&](Stmt& s) {
          w.Bind(s);
          s.Bind(n + 1, limit).Bind(n + 2, offset);
        },
        [&](Stmt& row) {
          page.markers.push_back({row.Text(0), row.Text(1), row.Int(2), row.Int(3) != 0,
                                  row.Int(4) != 0, row.OptText(5), row.OptText(6)});
          return Status::Ok();
        });
  });
  if (!s.ok()) return s;
  page.truncated = offset + static_cast<std::int64_t>(page.markers.size()) < page.total;
  return page;
}

Result<std::vector<std::string>> SqliteTriggerStore::EventCodes() {
  Result<std::vector<std::string>> out = std::vector<std::string>();
  Status s = db_->Read([&](Conn& c) {
    out = Texts(c,
                "SELECT DISTINCT event_code FROM trig_events WHERE app_id = ?1 ORDER BY event_code",
                [&](Stmt& s) { s.Bind(1, app_); });
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

Status SqliteTriggerStore::LinkTriggerRunToEvents(const std::vector<std::string>& event_ids,
                                                  const std::string& invocation_id,
                                                  const std::string& trigger_run_id) {
  if (event_ids.empty()) return Status::Ok();
  return db_->Write([&](Conn& c) -> Status {
    const TimestampUs now = clock_->NowMicros();
    for (const std::string& event_id : event_ids) {
      Status s = Exec(c,
                      "INSERT OR IGNORE INTO trig_event_links (app_id, event_id, invocation_id, "
                      "trigger_run_id, linked_at_us) VALUES (?1, ?2, ?3, ?4, ?5)",
                      [&](Stmt& s) {
                        s.Bind(1, app_).Bind(2, event_id).Bind(3, invocation_id);
                        s.Bind(4, trigger_run_id).Bind(5, now);
                      });
      if (!s.ok()) return s;
    }
    return Status::Ok();
  });
}

Result<std::vector<std::string>> SqliteTriggerStore::InvocationsTriggeredByEvent(
    const std::string& event_id) {
  Result<std::vector<std::string>> out = std::vector<std::string>();
  Status s = db_->Read([&](Conn& c) {
    out = LinkedInvocationsTx(c, event_id);
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace sqlite_trigger
}  // namespace pynenc_cpp
