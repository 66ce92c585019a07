// Between two solved instants a node's offset from the reference is not a
// straight line where a clock daemon changed either clock's rate: REALTIME
// bends at each change, the oscillators underneath do not. With the nodes'
// timebase.jsonl (trace/correct/timebase_file.h), the correction follows
// those bends (docs/trace-correction.md "Between solved instants"):
//
//   offset(t) = chord of the solved offsets (t)
//             + h_node(t + offset(t)) − h_ref(t),
//
// h a clock's REALTIME − RAW less its chord over the interval: zero at
// both solved instants, its knots the daemon's rate changes. What is left
// of the offset after taking the two shapes out is the oscillators' (and
// the fit clocks', which are RAW scaled) difference, which the chord
// follows as before. Each knot of either shape inside the interval becomes
// an instant of the node's map, between the solved ones; the correction
// stays piecewise linear, and every path that maps through its pieces
// follows the discipline.
//
// Every interval between two solved instants of the node is followed, a gap
// too (the daemons' bends are known there as anywhere), each clock's shape
// only where its timebase covers the whole interval with no step or restart
// inside.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "trace/correct/offsets_file.h"
#include "trace/correct/timebase_file.h"

namespace chronolink::trace {

struct DisciplineStats {
  uint64_t intervals_followed = 0;   // intervals where at least one shape applied
  uint64_t intervals_uncovered = 0;  // a timebase was given for a clock but did not cover the interval
  uint64_t instants_added = 0;
};

// The records (sorted by node, t_ns, as OffsetsInput holds them) with the
// instants between solved ones added (`between_instants`). The reference's
// own records are left as they are (its offset is 0 throughout). A mean reference's shape would be
// the mean of every node's: not supported, the records come back as they
// are (the command line refuses the combination).
std::vector<OffsetRecord> FollowDiscipline(const std::vector<OffsetRecord>& records, const ClockReference& reference,
                                           const std::map<uint32_t, NodeTimebase>& timebases, DisciplineStats* stats);

}  // namespace chronolink::trace
