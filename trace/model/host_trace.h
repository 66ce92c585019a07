// The in-memory model chronolink-trace works on: one host's profile, held as
// an XSpace in a protobuf arena, whatever format it was read from. Importers
// (trace/importers/<format>/) fill it, transforms (align, combine) change it,
// exporters (trace/exporters/) write it. XSpace is the model because it is
// the richest format we read and the one XProf draws: an XSpace read and
// written back is unchanged field for field, unknown fields included, and
// Chrome/Kineto JSON maps into it as docs/chrome-trace.md describes (what
// JSON has and XSpace does not is kept in stats the timeline ignores).
//
// Time: an event's instant is
//     line_base_ns + line.timestamp_ns  (ns)  +  event.offset_ps  (ps)
// on `clock`. Producers either write absolute line timestamps (line_base_ns
// = 0) or timestamps relative to the session start (line_base_ns = the
// `profile_start_time` of the `Task Environment` plane, or Kineto's
// `baseTimeNanoseconds`). The sum in picoseconds overflows int64 for epoch
// instants, so it is never formed: trace/model/trace_time.h splits it.
//
// Not thread-safe; one HostTrace per thread at a time.
#pragma once

#include <google/protobuf/arena.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "proto/xplane.pb.h"

namespace chronolink::trace {

enum class TraceFormat { kXSpace, kChromeJson };

// The clock the model's instants are on.
enum class TraceClock {
  kHostRealtime,  // the recording host's CLOCK_REALTIME, as the producer read it
  kClusterTime,   // cluster time after chronolink-trace align
};

struct HostTrace {
  HostTrace()
      : arena(std::make_unique<google::protobuf::Arena>()),
        space(google::protobuf::Arena::CreateMessage<xspace::XSpace>(arena.get())) {}
  HostTrace(HostTrace&&) = default;
  HostTrace& operator=(HostTrace&&) = default;

  std::unique_ptr<google::protobuf::Arena> arena;
  xspace::XSpace* space;  // owned by `arena`

  std::string host;                // the host the profile was recorded on
  std::filesystem::path source;    // where it was read from (empty when generated)
  TraceFormat source_format = TraceFormat::kXSpace;
  TraceClock clock = TraceClock::kHostRealtime;

  // Line timestamps are relative to this epoch instant (ns on `clock`); 0
  // when they are absolute. `line_base_known` is false when the producer
  // wrote relative times and nothing says relative to what (the legacy
  // PyTorch profiler): such a trace cannot be aligned until told.
  int64_t line_base_ns = 0;
  bool line_base_known = true;
};

}  // namespace chronolink::trace
