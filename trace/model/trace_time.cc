#include "trace/model/trace_time.h"

namespace chronolink::trace {

std::optional<TraceInstant> AddPs(const TraceInstant& t, int64_t ps) {
  // Split ps into whole ns and a remainder in [0, 1000).
  int64_t add_ns = ps / 1000;
  int64_t rem = ps % 1000;
  if (rem < 0) {
    rem += 1000;
    add_ns -= 1;
  }
  int64_t total_ps = t.ps + rem;
  if (total_ps >= 1000) {
    total_ps -= 1000;
    if (__builtin_add_overflow(add_ns, 1, &add_ns)) return std::nullopt;
  }
  TraceInstant out;
  if (__builtin_add_overflow(t.ns, add_ns, &out.ns)) return std::nullopt;
  out.ps = static_cast<int32_t>(total_ps);
  return out;
}

std::optional<TraceInstant> EventStart(int64_t line_base_ns, const xspace::XLine& line,
                                       const xspace::XEvent& event) {
  TraceInstant base;
  if (__builtin_add_overflow(line_base_ns, line.timestamp_ns(), &base.ns)) return std::nullopt;
  return AddPs(base, event.offset_ps());
}

std::optional<TraceInstant> EventEnd(int64_t line_base_ns, const xspace::XLine& line,
                                     const xspace::XEvent& event) {
  const auto start = EventStart(line_base_ns, line, event);
  if (!start) return std::nullopt;
  return AddPs(*start, event.duration_ps());
}

std::optional<int64_t> DiffPs(const TraceInstant& to, const TraceInstant& from) {
  int64_t dns;
  if (__builtin_sub_overflow(to.ns, from.ns, &dns)) return std::nullopt;
  int64_t ps;
  if (__builtin_mul_overflow(dns, int64_t{1000}, &ps)) return std::nullopt;
  if (__builtin_add_overflow(ps, int64_t{to.ps} - from.ps, &ps)) return std::nullopt;
  return ps;
}

}  // namespace chronolink::trace
