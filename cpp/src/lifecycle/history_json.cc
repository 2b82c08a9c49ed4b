// InvocationHistory.to_json() in C++ (see native/lifecycle.h).
//
// Every status change writes one of these rows, so the common case is built by
// hand: a string that json.dumps leaves as it is (printable ASCII, no quote, no
// backslash) is copied between quotes, and the date part of a timestamp is
// formatted once per second per thread. Anything else goes through nlohmann,
// whose output for it is what json.dumps prints.
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "pynenc_cpp/native/lifecycle.h"

namespace pynenc_cpp {
namespace {

// True when json.dumps(text) is `text` between double quotes: printable ASCII
// (0x20 to 0x7e) without a quote or a backslash.
bool DumpsAsIs(const std::string& text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
  }
  return true;
}

// Appends json.dumps of one str (ensure_ascii, as Python's default).
void AppendQuoted(std::string& out, const std::string& text) {
  if (DumpsAsIs(text)) {
    out += '"';
    out += text;
    out += '"';
    return;
  }
  out += nlohmann::json(text).dump(-1, ' ', /*ensure_ascii=*/true,
                                   nlohmann::json::error_handler_t::replace);
}

void AppendQuotedOpt(std::string& out, const std::optional<std::string>& text) {
  if (text) {
    AppendQuoted(out, *text);
  } else {
    out += "null";
  }
}

// "YYYY-MM-DDTHH:MM:SS" of `seconds` since the epoch, UTC; the last one is kept
// per thread (the rows of a burst share their second).
const std::string& SecondText(std::int64_t seconds) {
  thread_local std::int64_t cached_seconds = 0;
  thread_local std::string cached;
  if (cached.empty() || cached_seconds != seconds) {
    const std::time_t t = static_cast<std::time_t>(seconds);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    cached = buf;
    cached_seconds = seconds;
  }
  return cached;
}

}  // namespace

std::string IsoFormatUtc(TimestampUs us) {
  std::int64_t seconds = us / 1'000'000;
  std::int64_t micros = us % 1'000'000;
  if (micros < 0) {  // floor division for times before the epoch
    micros += 1'000'000;
    seconds -= 1;
  }
  std::string out = SecondText(seconds);
  // datetime.isoformat() leaves the fraction out when it is zero.
  if (micros != 0) {
    char fraction[8] = {'.', '0', '0', '0', '0', '0', '0', '\0'};
    for (int i = 6; i >= 1; --i) {
      fraction[i] = static_cast<char>('0' + micros % 10);
      micros /= 10;
    }
    out += fraction;
  }
  out += "+00:00";
  return out;
}

std::string HistoryJson(const InvocationId& id, const StatusRecord& record,
                        const std::string& runner_context_id,
                        const std::optional<std::string>& registered_by) {
  std::string when;
  AppendQuoted(when, IsoFormatUtc(record.timestamp_us));
  std::string out;
  out.reserve(256);
  out += "{\"invocation_id\": ";
  AppendQuoted(out, id.str());
  out += ", \"_timestamp\": ";
  out += when;
  out += ", \"status_record\": {\"status\": ";
  AppendQuoted(out, std::string(StatusName(record.status)));
  out += ", \"runner_id\": ";
  AppendQuotedOpt(out, record.runner_id);
  out += ", \"timestamp\": ";
  out += when;
  out += "}, \"runner_context_id\": ";
  AppendQuoted(out, runner_context_id);
  out += ", \"registered_by_inv_id\": ";
  AppendQuotedOpt(out, registered_by);
  out += "}";
  return out;
}

}  // namespace pynenc_cpp
