// A node's REALTIME as a function of its MONOTONIC_RAW, kept as few knots:
// what a trace needs to follow the node's clock discipline between solved
// instants (docs/clocks.md "Disciplined clocks"). A daemon changes REALTIME's
// rate at discrete instants, so REALTIME over RAW is piecewise linear with a
// knot per change; samples of both clocks every millisecond or so find them.
//
// Streaming, with the swing filter: a segment starts at a sample and keeps
// the range of slopes that pass within `tolerance_ns` (plus each sample's
// bracket) of every sample since; the sample that empties the range closes
// it at the sample before, which starts the next. Knots are samples and the
// polyline their chords, so every sample lies within twice the tolerance of
// it, and a rate change between two samples d apart bends it by at most
// |change|·d/4 more (0.4 ns for 1.6 ppm at 1 ms). A segment also ends after
// 10 s, so that a clock nothing bends still has knots to cover it. A step (REALTIME against RAW beyond any rate) closes the segment
// and starts one marked as after a step. Where the samples know REALTIME's
// rate (the kernel says it) and it changed between two of them, the knot goes
// where the two lines meet: exactly where it changed, however sparse the
// samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "clock/realtime_raw_map.h"

namespace chronolink {

struct TimebaseKnot {
  int64_t raw_ns = 0;       // the node's MONOTONIC_RAW
  int64_t realtime_ns = 0;  // its REALTIME there
  bool after_step = false;  // REALTIME stepped between the previous knot and this one

  friend bool operator==(const TimebaseKnot&, const TimebaseKnot&) = default;
};

// The knots over an interval of RAW, as a window summary carries them to
// the leader: from the knot whose segment holds the interval's start through
// the first knot at or after its end. Where the open segment holds the end,
// its newest sample ends the excerpt (`last_provisional`: the segment may
// still end elsewhere, so a later excerpt's knots replace it).
struct TimebaseExcerpt {
  std::vector<TimebaseKnot> knots;  // at least two, no step between them
  bool last_provisional = false;

  friend bool operator==(const TimebaseExcerpt&, const TimebaseExcerpt&) = default;
};

class TimebaseKnots {
 public:
  // A segment ends after `max_segment_ns` even where it still fits: a clock
  // no daemon bends would otherwise have one knot for ever, and a reader
  // (the leader's cluster-timebase.jsonl, the trace tools) would know
  // nothing past it.
  explicit TimebaseKnots(int64_t tolerance_ns = 1, double max_rate = kMaxSlewRate,
                         int64_t max_segment_ns = 10'000'000'000);

  // A sample later in RAW than the last; an earlier one is ignored.
  void Add(const ClockPairSample& s);
  // Decides the open segment at its newest sample (the agent stopping): a
  // reader then knows the clock to the last sample, not only to the last
  // knot, up to 10 s before. Samples added after start a segment there.
  void EndOpenSegment();

  // The knots decided so far, in RAW order: each segment's start (the open
  // segment's is the last); a writer appends them as they come.
  const std::vector<TimebaseKnot>& knots() const { return knots_; }
  // Forgets knots before `raw_ns` (keeping the one the rest starts from);
  // returns how many went, for a writer's count.
  size_t DropBefore(int64_t raw_ns);

  // REALTIME at `raw_ns` by the knots and the open segment (its last
  // sample); nullopt outside them or across a step.
  std::optional<int64_t> RealtimeAt(int64_t raw_ns) const;

  // The excerpt over [raw_from, raw_to]; nullopt when the knots kept do not
  // cover it, a step lies inside, or it would take more than `max_knots`.
  std::optional<TimebaseExcerpt> Covering(int64_t raw_from, int64_t raw_to, size_t max_knots) const;

  uint64_t samples() const { return samples_; }

 private:
  void StartSegment(const ClockPairSample& s, bool after_step);
  bool Fits(const ClockPairSample& s, double* lo, double* hi) const;

  int64_t tolerance_ns_;
  double max_rate_;
  int64_t max_segment_ns_;
  std::vector<TimebaseKnot> knots_;
  bool open_ = false;
  ClockPairSample start_{};   // the open segment's first sample
  ClockPairSample last_{};    // its last
  double slope_lo_ = 0, slope_hi_ = 0;  // d(REALTIME)/d(RAW) still possible
  uint64_t samples_ = 0;
};

}  // namespace chronolink
