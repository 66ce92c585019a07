#include "trace/model/trace_time.h"

namespace chronolink::trace {

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

}  // namespace chronolink::trace
