// The offsets of a run arranged for drawing: the run's instants (every t_ns
// any node was solved at, on the reference clock) and, per node, which of
// its records form unbroken solved stretches, where it was unreachable and
// which instants of the run it has no line for. Plain data computed once;
// read-only afterwards, thread-safe to read. Instants the trace correction
// sets aside as a stalled agent's (stalled_instants.h) are solved but not
// followed: they break the lines and stay out of the ranges, so one wide
// spike does not flatten a row or every row's sigma scale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "trace/correct/offsets_file.h"

namespace chronolink::trace::report {

struct RunTimeline {
  std::vector<int64_t> instants;  // sorted, unique
  int64_t period_ns = 0;          // median spacing of instants; 0 with fewer than two

  bool empty() const { return instants.empty(); }
  int64_t first_ns() const { return instants.front(); }
  int64_t last_ns() const { return instants.back(); }
  // Seconds from the first instant (the int64 difference taken first, so
  // epoch instants never pass through a double).
  double SecondsSinceFirst(int64_t t_ns) const;
};

struct IndexRange {
  size_t first = 0;  // inclusive
  size_t last = 0;   // inclusive
};

struct NodeSeries {
  uint32_t node = 0;
  std::span<const OffsetRecord> records;  // sorted by t_ns
  // Runs of consecutive reachable records with no run instant missed
  // between them (indices into `records`): one polyline each.
  std::vector<IndexRange> solved_stretches;
  std::vector<IndexRange> unreachable_runs;  // indices into `records`
  std::vector<IndexRange> missing_runs;      // indices into RunTimeline::instants
  std::vector<IndexRange> set_aside_runs;    // indices into `records`
  size_t reachable = 0;                      // set-aside instants included
  size_t set_aside = 0;
  size_t unreachable = 0;
  size_t missing = 0;
  // Over reachable records not set aside; 0 when there is none.
  double offset_min_ns = 0, offset_max_ns = 0;
  double sigma_min_ns = 0, sigma_max_ns = 0;
  double set_aside_sigma_max_ns = 0;  // the widest set-aside instant's
};

RunTimeline BuildTimeline(const OffsetsInput& offsets);
// One entry per node present in `offsets`, by node id; `timeline` must have
// been built from the same offsets. `set_aside`: one flag per record of
// `offsets` (FindStalledInstants), or empty for none.
std::vector<NodeSeries> BuildNodeSeries(const OffsetsInput& offsets, const RunTimeline& timeline,
                                        const std::vector<bool>& set_aside = {});

}  // namespace chronolink::trace::report
