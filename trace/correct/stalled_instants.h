// Solved instants a stalled agent left behind, set aside before a node's map
// is built (docs/trace-correction.md "Stalled instants").
//
// A VM that stops an agent for a second delays its probes by that second:
// in a loaded run of 2026-12-06 two windows' fits erred -79 and +825 µs
// under sigmas of 255 and 356 µs, where the instants around them had
// 40-150 ns. The solve reported those offsets honestly (their sigmas cover
// them), and a map through them bent every event of those 4 s by up to
// 713 µs (trace p99 178 µs). The instants on either side predict the offset
// there far better, so the map does without them: such an instant is
// treated as missed (a gap, whose bound is widened for the drift it does not
// see, node_correction.h).
#pragma once

#include <cstddef>
#include <vector>

#include "trace/correct/offsets_file.h"

namespace chronolink::trace {

struct StalledInstantOptions {
  // An instant is set aside when its sigma exceeds this many times both the
  // median of its node's sigmas around it and the sigmas of the nearest
  // ordinary instant (one not itself over the median's bar) on each side.
  // 0: none is.
  double sigma_factor = 8.0;
  // How many of the node's solved instants on each side the median takes.
  size_t neighbours_each_side = 32;
};

// `records` sorted by (node, t_ns), one per node and instant
// (MergeSameInstants). One flag per record: true where the record is a
// stalled agent's instant. The report draws these apart (docs/report.md).
std::vector<bool> FindStalledInstants(const std::vector<OffsetRecord>& records,
                                      const StalledInstantOptions& options = {});

// The same records; removes every instant FindStalledInstants flags and
// returns how many.
// Only a node's solved instants count (not an unreachable one, nor one
// placed between instants); an instant with no ordinary one on either side
// is kept, so a node's first instants (wide until its edges have history)
// and its last one never go.
size_t SetAsideStalledInstants(std::vector<OffsetRecord>* records, const StalledInstantOptions& options = {});

}  // namespace chronolink::trace
