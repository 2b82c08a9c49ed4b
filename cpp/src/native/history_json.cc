// InvocationHistory.to_json() in C++ (see native/lifecycle.h).
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "pynenc_cpp/native/lifecycle.h"

namespace pynenc_cpp {
namespace {

// json.dumps of one str (ensure_ascii, as Python's default).
std::string Quote(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', /*ensure_ascii=*/true,
                                   nlohmann::json::error_handler_t::replace);
}

std::string QuoteOpt(const std::optional<std::string>& text) {
  return text ? Quote(*text) : std::string("null");
}

}  // namespace

std::string IsoFormatUtc(TimestampUs us) {
  std::int64_t seconds = us / 1'000'000;
  std::int64_t micros = us % 1'000'000;
  if (micros < 0) {  // floor division for times before the epoch
    micros += 1'000'000;
    seconds -= 1;
  }
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  // datetime.isoformat() leaves the fraction out when it is zero.
  if (micros == 0) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d+00:00", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  } else {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lld+00:00",
                  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(micros));
  }
  return buf;
}

std::string HistoryJson(const InvocationId& id, const StatusRecord& record,
                        const std::string& runner_context_id,
                        const std::optional<std::string>& registered_by) {
  const std::string when = Quote(IsoFormatUtc(record.timestamp_us));
  std::string out;
  out.reserve(256);
  out += "{\"invocation_id\": ";
  out += Quote(id.str());
  out += ", \"_timestamp\": ";
  out += when;
  out += ", \"status_record\": {\"status\": ";
  out += Quote(std::string(StatusName(record.status)));
  out += ", \"runner_id\": ";
  out += QuoteOpt(record.runner_id);
  out += ", \"timestamp\": ";
  out += when;
  out += "}, \"runner_context_id\": ";
  out += Quote(runner_context_id);
  out += ", \"registered_by_inv_id\": ";
  out += QuoteOpt(registered_by);
  out += "}";
  return out;
}

}  // namespace pynenc_cpp
