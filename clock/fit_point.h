// A fit clock's definition (its anchor), and one point of a node's REALTIME
// against it (clock/fit_clock.h), as window summaries carry them to the
// leader (docs/formats.md).
#pragma once

#include <cstdint>

namespace chronolink {

// round(num / den), halves away from zero; den > 0. The fit clock's
// conversions in exact integer arithmetic.
inline int64_t RoundedQuotient(__int128 num, __int128 den) {
  return static_cast<int64_t>((num >= 0 ? num + den / 2 : num - den / 2) / den);
}

// The fit clock as a function of RAW: F = realtime_ns + (RAW − raw_ns)·(1 +
// rate). Exact integer arithmetic, rounded to nearest.
struct FitAnchor {
  int64_t raw_ns = 0;       // MONOTONIC_RAW at the anchor
  int64_t realtime_ns = 0;  // REALTIME there: F's value at the anchor
  int64_t rate_fine = 0;    // REALTIME's rate against RAW there, less 1, in 1e-15: F's

  int64_t FitOfRaw(int64_t raw_ns) const;
  int64_t RawOfFit(int64_t fit_ns) const;
  friend bool operator==(const FitAnchor&, const FitAnchor&) = default;
};

// A node's REALTIME at one instant of its fit clock, and REALTIME's rate
// against F there (less 1, in 1e-15 per ns): what the leader needs to map
// a solution in F back to REALTIME near that instant. A node fitting in
// REALTIME itself has realtime_ns == fit_ns and rate 0.
struct FitPoint {
  int64_t fit_ns = 0;
  int64_t realtime_ns = 0;
  int64_t rate_fine = 0;

  // REALTIME − F at fit instant `fit_ns` along this point's rate.
  int64_t RealtimeMinusFitAt(int64_t fit_ns) const;
  friend bool operator==(const FitPoint&, const FitPoint&) = default;
};

// The same instant's point on another fit clock of the same node: `p` is
// on the clock `from` defines, the result on the one `to` defines (both
// functions of RAW, so the one instant is one RAW). REALTIME is the same;
// F and REALTIME's rate against it are `to`'s. What a clock page follows
// along after F was anchored again: the solution's anchor, not the new one.
FitPoint PointOnAnchor(const FitPoint& p, const FitAnchor& from, const FitAnchor& to);

// A node's discipline at one instant, as the leader mapped it: REALTIME − F
// there, and REALTIME's rate against F, less 1. A solution carries its
// node's (docs/leader.md), so that the node's agent can put into its clock
// page what its daemon did since (docs/formats.md "Clock page").
struct FitDiscipline {
  int64_t d_ns = 0;
  double rate = 0;
  friend bool operator==(const FitDiscipline&, const FitDiscipline&) = default;
};

}  // namespace chronolink
