// A host trace's first and last instants on its own clock: every timed
// event's start and end (an event counting occurrences has no time), and
// the session bounds the producer recorded (`Task Environment`
// profile_start_time / profile_stop_time, when they fit int64). Alignment
// takes its common origin from the mapped first instants of all hosts.
//
// Pure function of the model.
#pragma once

#include <string>

#include "trace/model/host_trace.h"
#include "trace/model/trace_time.h"

namespace chronolink::trace {

struct HostSpanInstants {
  TraceInstant first;
  TraceInstant last;
  friend bool operator==(const HostSpanInstants&, const HostSpanInstants&) = default;
};

// False with `*error` when the trace has no timed event, or an event's
// instant does not fit int64 ns.
bool HostSpan(const HostTrace& host, HostSpanInstants* span, std::string* error);

// Widens `span` (valid when `*any`) by `t`.
inline void TakeInstant(const TraceInstant& t, HostSpanInstants* span, bool* any) {
  if (!*any || t < span->first) span->first = t;
  if (!*any || t > span->last) span->last = t;
  *any = true;
}

// Widens `span` by the session bounds the producer recorded (the first
// `Task Environment` plane's profile_start_time / profile_stop_time, epoch
// ns; absent or beyond int64: ignored), as XProf reads them.
void TakeSessionBounds(const xspace::XSpace& space, HostSpanInstants* span, bool* any);

}  // namespace chronolink::trace
