#include "trace/model/host_span.h"

#include <cstdint>

#include "common/quoted_text.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {

bool HostSpan(const HostTrace& host, HostSpanInstants* span, std::string* error) {
  bool any = false;
  for (const auto& plane : host.space->planes()) {
    for (const auto& line : plane.lines()) {
      for (const auto& event : line.events()) {
        if (event.data_case() == xspace::XEvent::kNumOccurrences) continue;
        const auto s = EventStart(host.line_base_ns, line, event);
        const auto e = s ? AddPs(*s, event.duration_ps()) : std::nullopt;
        if (!s || !e) {
          *error = "host " + ShownName(host.host) + ": an event of plane " + QuotedText(plane.name()) + " line " +
                   QuotedText(line.name()) + " lies outside int64 nanoseconds";
          return false;
        }
        TakeInstant(*s, span, &any);
        TakeInstant(*e, span, &any);
      }
    }
  }
  TakeSessionBounds(*host.space, span, &any);
  if (!any) *error = "host " + ShownName(host.host) + ": the trace has no timed event";
  return any;
}

void TakeSessionBounds(const xspace::XSpace& space, HostSpanInstants* span, bool* any) {
  for (const auto bound : {ProfileStartTime(space), ProfileStopTime(space)}) {
    if (bound && *bound <= static_cast<uint64_t>(INT64_MAX)) {
      TakeInstant({static_cast<int64_t>(*bound), 0}, span, any);
    }
  }
}

}  // namespace chronolink::trace
