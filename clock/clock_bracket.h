// One clock read between two reads of another, the tightest of several
// kept: how chronolink relates any two clocks it can read (REALTIME against
// MONOTONIC, TAI, BOOTTIME, a NIC's PTP clock), as phc2sys and chrony's
// refclocks do. The other clock's read latched at some reference instant
// inside (before, after); with reads floored to a granularity g, the offset
// at the bracket's midpoint is within ceil(w / 2) + g of the truth, w the
// bracket's width.
#pragma once

#include <time.h>

#include <cstdint>
#include <limits>

namespace chronolink {

struct ClockBracket {
  int64_t before_ns = 0;  // the reference clock, read first
  int64_t other_ns = 0;   // the other clock, read in between
  int64_t after_ns = 0;   // the reference clock, read last
  int64_t width_ns() const { return after_ns - before_ns; }
};

// The other clock minus the reference at the bracket's midpoint.
struct BracketOffset {
  int64_t ref_ns = 0;      // the midpoint, on the reference clock
  int64_t offset_ns = 0;   // other − reference there
  int64_t error_ns = 0;    // ceil(width / 2) + granularity
  int64_t bracket_ns = 0;  // the width
};

// Keeps the tightest of the brackets offered.
class TightestBracket {
 public:
  // False, and not kept, when the reference clock went backwards: no bracket.
  bool Offer(const ClockBracket& b) {
    const int64_t width = b.width_ns();
    if (width < 0) return false;
    if (width < best_width_) {
      best_ = b;
      best_width_ = width;
    }
    return true;
  }
  bool found() const { return best_width_ != std::numeric_limits<int64_t>::max(); }
  // The tightest width so far; INT64_MAX before any bracket.
  int64_t width_ns() const { return best_width_; }
  // Only once found().
  BracketOffset OffsetAtMidpoint(int64_t granularity_ns) const {
    BracketOffset o;
    o.ref_ns = best_.before_ns + best_width_ / 2;
    o.offset_ns = best_.other_ns - o.ref_ns;
    o.error_ns = (best_width_ + 1) / 2 + granularity_ns;
    o.bracket_ns = best_width_;
    return o;
  }

 private:
  ClockBracket best_;
  int64_t best_width_ = std::numeric_limits<int64_t>::max();
};

// The tightest of `reads` brackets of `other` between two reads of
// `reference`, each taken with `read(clock)`.
template <typename Read>
TightestBracket TightestOfReads(int reads, const Read& read, clockid_t reference, clockid_t other) {
  TightestBracket tightest;
  for (int i = 0; i < reads; ++i) {
    ClockBracket b;
    b.before_ns = read(reference);
    b.other_ns = read(other);
    b.after_ns = read(reference);
    tightest.Offer(b);
  }
  return tightest;
}

}  // namespace chronolink
