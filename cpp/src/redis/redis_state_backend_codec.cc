// Redis state backend: the packing of records into one binary-safe string and
// the history positions (redis_state_backend_impl.h), and the layout helpers
// other modules' scripts use (redis_state_backend.h). The backend class:
// redis_state_backend.cc; the Lua scripts: redis_state_backend_scripts.cc.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redis/redis_state_backend.h"
#include "redis/redis_state_backend_impl.h"

namespace pynenc_cpp::redis {
namespace state_impl {
namespace {

// Whole-string integer parse; nullopt on anything malformed (never throws).
template <typename T>
std::optional<T> ParseInt(const std::string& s, int base = 10) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// --- packing of records into one binary-safe string -------------------------
// Each field is "N" (absent) or "S<len>:<bytes>".
using Fields = std::vector<std::optional<std::string>>;

std::string Pack(const Fields& fields) {
  std::string out;
  for (const auto& f : fields) {
    if (!f) {
      out += 'N';
      continue;
    }
    out += 'S';
    out += std::to_string(f->size());
    out += ':';
    out += *f;
  }
  return out;
}

std::optional<Fields> Unpack(const std::string& packed, std::size_t count) {
  Fields out;
  std::size_t i = 0;
  while (out.size() < count) {
    if (i >= packed.size()) return std::nullopt;
    if (packed[i] == 'N') {
      out.emplace_back(std::nullopt);
      ++i;
      continue;
    }
    if (packed[i] != 'S') return std::nullopt;
    const std::size_t colon = packed.find(':', i);
    if (colon == std::string::npos) return std::nullopt;
    if (colon == i + 1 || colon - i - 1 > 12) return std::nullopt;
    std::size_t len = 0;
    for (std::size_t d = i + 1; d < colon; ++d) {
      if (packed[d] < '0' || packed[d] > '9') return std::nullopt;
      len = len * 10 + static_cast<std::size_t>(packed[d] - '0');
    }
    if (len > packed.size() - colon - 1) return std::nullopt;
    out.emplace_back(packed.substr(colon + 1, len));
    i = colon + 1 + len;
  }
  return out;
}

template <typename T>
std::optional<std::string> OptStr(const std::optional<T>& id) {
  if (!id) return std::nullopt;
  return id->str();
}

}  // namespace

std::string PackInvocation(const InvocationRecord& r) {
  return Pack(
      {r.invocation_id.str(), r.call_id.str(), r.task_id.str(), r.arguments_id,
       r.serialized_arguments, OptStr(r.parent_invocation_id), r.parent_event_id,
       r.workflow ? std::optional<std::string>(r.workflow->workflow_id.str()) : std::nullopt,
       r.workflow ? std::optional<std::string>(r.workflow->workflow_type.str()) : std::nullopt,
       r.workflow ? OptStr(r.workflow->parent_workflow_id) : std::nullopt});
}

std::optional<InvocationRecord> UnpackInvocation(const std::string& packed) {
  std::optional<Fields> f = Unpack(packed, 10);
  if (!f || !(*f)[0] || !(*f)[1] || !(*f)[2] || !(*f)[3] || !(*f)[4]) return std::nullopt;
  InvocationRecord r;
  r.invocation_id = InvocationId(*(*f)[0]);
  r.call_id = CallId(*(*f)[1]);
  r.task_id = TaskId(*(*f)[2]);
  r.arguments_id = *(*f)[3];
  r.serialized_arguments = *(*f)[4];
  if ((*f)[5]) r.parent_invocation_id = InvocationId(*(*f)[5]);
  r.parent_event_id = (*f)[6];
  if ((*f)[7] && (*f)[8]) {
    WorkflowRecord w{WorkflowId(*(*f)[7]), TaskId(*(*f)[8]), std::nullopt};
    if ((*f)[9]) w.parent_workflow_id = WorkflowId(*(*f)[9]);
    r.workflow = std::move(w);
  }
  return r;
}

std::string PackRunner(const RunnerContextRecord& r) {
  return Pack({r.runner_id.str(), r.runner_cls, OptStr(r.parent_runner_id), std::to_string(r.pid),
               r.hostname, std::to_string(r.thread_id)});
}

std::optional<RunnerContextRecord> UnpackRunner(const std::string& packed) {
  std::optional<Fields> f = Unpack(packed, 6);
  if (!f || !(*f)[0] || !(*f)[1] || !(*f)[3] || !(*f)[4] || !(*f)[5]) return std::nullopt;
  const std::optional<std::int64_t> pid = ParseInt<std::int64_t>(*(*f)[3]);
  const std::optional<std::int64_t> thread_id = ParseInt<std::int64_t>(*(*f)[5]);
  if (!pid || !thread_id) return std::nullopt;
  RunnerContextRecord r;
  r.runner_id = RunnerId(*(*f)[0]);
  r.runner_cls = *(*f)[1];
  if ((*f)[2]) r.parent_runner_id = RunnerId(*(*f)[2]);
  r.pid = *pid;
  r.hostname = *(*f)[4];
  r.thread_id = *thread_id;
  return r;
}

std::string PackWorkflow(const WorkflowRecord& w) {
  return Pack({w.workflow_id.str(), w.workflow_type.str(), OptStr(w.parent_workflow_id)});
}

std::optional<WorkflowRecord> UnpackWorkflow(const std::string& packed) {
  std::optional<Fields> f = Unpack(packed, 3);
  if (!f || !(*f)[0] || !(*f)[1]) return std::nullopt;
  WorkflowRecord w{WorkflowId(*(*f)[0]), TaskId(*(*f)[1]), std::nullopt};
  if ((*f)[2]) w.parent_workflow_id = WorkflowId(*(*f)[2]);
  return w;
}

// --- history positions ------------------------------------------------------
// 16 lowercase hex digits; timestamps have their sign bit flipped so that
// negative ones sort first.
std::string Hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return std::string(buf, 16);
}
std::string EncodeTs(TimestampUs ts) {
  return Hex16(static_cast<std::uint64_t>(ts) ^ (std::uint64_t{1} << 63));
}

std::optional<HistoryPosition> DecodePos(const std::string& member) {
  if (member.size() < kPosLen) return std::nullopt;
  const std::optional<std::uint64_t> ts = ParseInt<std::uint64_t>(member.substr(0, 16), 16);
  const std::optional<std::uint64_t> seq = ParseInt<std::uint64_t>(member.substr(16, 16), 16);
  if (!ts || !seq) return std::nullopt;
  return HistoryPosition{static_cast<TimestampUs>(*ts ^ (std::uint64_t{1} << 63)), *seq};
}

// "<status>|<json>"
std::string PackHistoryValue(const HistoryRecord& r) {
  return std::to_string(static_cast<int>(r.status)) + "|" + r.history_json;
}

std::optional<HistoryRecord> UnpackHistory(const std::string& pos, const std::string& id,
                                           const std::string& value) {
  const std::optional<HistoryPosition> p = DecodePos(pos);
  const std::size_t bar = value.find('|');
  if (!p || bar == std::string::npos) return std::nullopt;
  const std::optional<int> status = ParseInt<int>(value.substr(0, bar));
  if (!status) return std::nullopt;
  HistoryRecord r;
  r.invocation_id = InvocationId(id);
  r.timestamp_us = p->timestamp_us;
  r.status = static_cast<InvocationStatus>(*status);
  r.history_json = value.substr(bar + 1);
  return r;
}

}  // namespace state_impl

using state_impl::EncodeTs;
using state_impl::OptStr;
using state_impl::PackHistoryValue;
using state_impl::PackInvocation;
using state_impl::UnpackInvocation;

std::string HistoryPositionPrefix(TimestampUs ts) { return EncodeTs(ts); }

std::vector<std::string> UpsertFields(const InvocationRecord& r) {
  auto opt = [](const std::optional<std::string>& v) { return v ? "=" + *v : std::string(); };
  return {PackInvocation(r), opt(OptStr(r.parent_invocation_id)), opt(r.parent_event_id),
          r.workflow ? "=" + r.workflow->workflow_id.str() : std::string(),
          r.workflow ? "=" + r.workflow->workflow_type.str() : std::string()};
}
std::string HistoryValue(const HistoryRecord& r) { return PackHistoryValue(r); }
std::optional<InvocationRecord> ParseInvocationRecord(const std::string& packed) {
  return UnpackInvocation(packed);
}

}  // namespace pynenc_cpp::redis
