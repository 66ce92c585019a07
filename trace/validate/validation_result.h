// What `chronolink-trace validate` found on one set of traces (all on one
// clock): per family counts, the happens-before violations, and the skew
// of collective starts and ends across participants. Produced by
// ValidateTraces (trace/validate/validate.h), printed by
// trace/validate/validate_report.h; plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/model/trace_time.h"
#include "trace/validate/collective_events.h"

namespace chronolink::trace {

// Distribution of one skew over matched instances (nearest-rank
// percentiles), in picoseconds; zeros when count is 0.
struct SkewStats {
  int64_t count = 0;
  int64_t p50_ps = 0;
  int64_t p90_ps = 0;
  int64_t p99_ps = 0;
  int64_t max_ps = 0;
};

// A participant finished an instance before another started it (or a
// receive ended before its send started) by more than the tolerance.
struct Violation {
  std::string family;
  std::string key;
  std::optional<int64_t> seq;
  int64_t ordinal = 0;
  bool transfer = false;        // a send/recv pair rather than a collective
  std::string ended_first;      // the participant whose end is earliest (the receiver)
  std::string started_last;     // the participant whose start is latest (the sender)
  TraceInstant ended_first_at;  // on the traces' clock
  TraceInstant started_last_at;
  int64_t by_ps = 0;            // started_last_at - ended_first_at (> tolerance)
  int participants = 0;
};

struct FamilySummary {
  std::string family;
  Dependency dependency = Dependency::kUnknown;
  int64_t events = 0;
  int64_t matched_instances = 0;
  int64_t unmatched_events = 0;
  int64_t checked_instances = 0;
  int64_t violations = 0;
  SkewStats start_skew;  // max start - min start per matched instance
  SkewStats end_skew;    // max end - min end
  std::vector<std::string> notes;
};

struct ValidationResult {
  std::vector<std::string> hosts;  // display names, in input order
  int64_t tolerance_ps = 0;
  std::vector<FamilySummary> families;  // by family name

  int64_t events = 0;
  int64_t matched_instances = 0;  // collectives and transfers
  int64_t unmatched_events = 0;
  int64_t checked_instances = 0;
  int64_t violations_total = 0;
  SkewStats start_skew;  // over every matched collective instance
  SkewStats end_skew;

  std::vector<Violation> violations;  // worst first
  ExtractCounts skipped;              // summed over hosts
  std::vector<std::string> warnings;  // e.g. a host whose times are relative to an unknown origin
};

}  // namespace chronolink::trace
