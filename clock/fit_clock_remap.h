// A fit clock's rate changed without a jump (docs/clocks.md "A new rate at
// the start"): F ran at `rate_before_fine` up to the instant it read
// `at_fit_ns` and at `rate_after_fine` from there on, so F bends there.
// Every F value taken before that instant is below at_fit_ns and every
// later one at or above it: a value alone says which rate made it. A line
// fitted across the bend would not be one; the remap carries a value of
// the old rate onto the new rate's line drawn back (the straight frame),
// exactly, and back again, and leaves a later value as it is. Both nodes
// of an edge apply it, the one whose clock it is and its peers
// (docs/protocol.md "ClockRemap").
#pragma once

#include <cstdint>

namespace chronolink {

struct FitClockRemap {
  int64_t at_fit_ns = 0;
  int64_t rate_before_fine = 0;  // F's rate against RAW, less 1, in 1e-15
  int64_t rate_after_fine = 0;

  // `fit_ns` as the new rate would have read it (the straight frame).
  int64_t Apply(int64_t fit_ns) const;
  // Back from the straight frame to F as it was read.
  int64_t Invert(int64_t straight_ns) const;
  // (1 + after) / (1 + before): how much faster the straight frame runs
  // than F did before the bend.
  double RateRatio() const;
  friend bool operator==(const FitClockRemap&, const FitClockRemap&) = default;
};

}  // namespace chronolink
