// SQLite state backend: history, by invocation and by time range (the rows of
// state_history, in (timestamp, seq) order). The schema and the rest of the
// backend: sqlite_state_backend.cc; the class: sqlite_state_backend_impl.h.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "sqlite/sqlite_state_backend_impl.h"

namespace pynenc_cpp::sqlite::state_impl {
namespace {

std::int64_t ClampToInt64(std::uint64_t v) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(std::min(v, kMax));
}

// Columns: seq, invocation_id, timestamp_us, status, history_json.
Result<HistoryRecord> ReadHistory(const Stmt& q) {
  const std::string name = q.Text(3);
  std::optional<InvocationStatus> status = ParseStatus(name);
  if (!status) return Status::BackendFailure("state_history row has unknown status '" + name + "'");
  return HistoryRecord{InvocationId(q.Text(1)), q.Int(2), *status, q.Text(4)};
}

}  // namespace

// --- history ---
Status SqliteStateBackend::AddHistories(const std::vector<InvocationId>& ids,
                                        const HistoryRecord& record) {
  if (ids.empty()) return Status::Ok();
  const std::string status(StatusName(record.status));
  return db_->Write([&](Conn& c) -> Status {
    for (const InvocationId& id : ids) {
      SQ_PREPARE(q, c,
                 "INSERT INTO state_history (app_id, invocation_id, timestamp_us, status, "
                 "history_json) VALUES (?, ?, ?, ?, ?) "
                 "ON CONFLICT (app_id, invocation_id, timestamp_us, status) DO UPDATE SET "
                 "history_json = excluded.history_json");
      q.Bind(1, app_id_)
          .Bind(2, id.str())
          .Bind(3, std::int64_t{record.timestamp_us})
          .Bind(4, status)
          .Bind(5, record.history_json);
      SQ_RETURN_IF_ERROR(q.Run());
    }
    return Status::Ok();
  });
}

Result<std::vector<HistoryRecord>> SqliteStateBackend::GetHistory(const InvocationId& id) {
  std::vector<HistoryRecord> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.clear();
    SQ_PREPARE(q, c,
               "SELECT seq, invocation_id, timestamp_us, status, history_json FROM state_history "
               "WHERE app_id = ? AND invocation_id = ? ORDER BY timestamp_us, seq");
    q.Bind(1, app_id_).Bind(2, id.str());
    return EachRow(q, [&](const Stmt& row) -> Status {
      Result<HistoryRecord> h = ReadHistory(row);
      if (!h.ok()) return h.status();
      out.push_back(std::move(h).value());
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return out;
}

Result<HistoryPage> SqliteStateBackend::HistoryInRange(TimestampUs start_us, TimestampUs end_us,
                                                       std::optional<HistoryPosition> after,
                                                       std::size_t limit) {
  if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
  // Rows strictly after (from_ts, from_seq) in (timestamp, seq) order; without
  // a cursor inside the range, every row at start_us qualifies.
  TimestampUs from_ts = start_us;
  std::int64_t from_seq = std::numeric_limits<std::int64_t>::min();
  if (after && *after >= HistoryPosition{start_us, 0}) {
    from_ts = after->timestamp_us;
    from_seq = ClampToInt64(after->sequence);
  }
  // One row more than a page tells whether another page exists.
  const std::int64_t fetch = ClampToInt64(limit) == std::numeric_limits<std::int64_t>::max()
                                 ? ClampToInt64(limit)
                                 : ClampToInt64(limit) + 1;
  HistoryPage page;
  Status s = db_->Read([&](Conn& c) -> Status {
    page = HistoryPage();
    SQ_PREPARE(q, c,
               "SELECT seq, invocation_id, timestamp_us, status, history_json FROM state_history "
               "WHERE app_id = ?1 AND timestamp_us >= ?2 AND timestamp_us <= ?3 "
               "AND (timestamp_us > ?2 OR seq > ?4) ORDER BY timestamp_us, seq LIMIT ?5");
    q.Bind(1, app_id_)
        .Bind(2, std::int64_t{from_ts})
        .Bind(3, std::int64_t{end_us})
        .Bind(4, from_seq)
        .Bind(5, fetch);
    HistoryPosition last{};
    return EachRow(q, [&](const Stmt& row) -> Status {
      if (page.records.size() == limit) {
        page.next = last;
        return Status::Ok();
      }
      Result<HistoryRecord> h = ReadHistory(row);
      if (!h.ok()) return h.status();
      page.records.push_back(std::move(h).value());
      last = HistoryPosition{row.Int(2), static_cast<std::uint64_t>(row.Int(0))};
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return page;
}

Result<std::vector<InvocationId>> SqliteStateBackend::InvocationsInRange(
    TimestampUs start_us, TimestampUs end_us, const std::optional<InvocationId>& after,
    std::size_t limit) {
  if (limit == 0) return Status::InvalidArgument("batch size must be > 0");
  std::vector<InvocationId> out;
  Status s = db_->Read([&](Conn& c) -> Status {
    out.clear();
    const std::string sql =
        std::string("SELECT DISTINCT invocation_id FROM state_history WHERE app_id = ?1 AND "
                    "timestamp_us >= ?2 AND timestamp_us <= ?3") +
        (after ? " AND invocation_id > ?5" : "") + " ORDER BY invocation_id LIMIT ?4";
    SQ_PREPARE(q, c, sql);
    q.Bind(1, app_id_)
        .Bind(2, std::int64_t{start_us})
        .Bind(3, std::int64_t{end_us})
        .Bind(4, ClampToInt64(limit));
    if (after) q.Bind(5, after->str());
    return EachRow(q, [&](const Stmt& row) {
      out.emplace_back(row.Text(0));
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace pynenc_cpp::sqlite::state_impl
