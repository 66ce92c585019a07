// A node's CLOCK_REALTIME related to its CLOCK_MONOTONIC_RAW, from frequent
// samples of both. A clock daemon changes REALTIME's rate at every update
// (and may step it); MONOTONIC_RAW runs free of it. The agent relates the two
// locally, so that what it fits between nodes is free of every node's
// discipline (docs/clocks.md "Disciplined clocks").
//
// Between two samples the map is the straight line through them, or, where
// both know REALTIME's rate and it changed, the two lines to where they meet
// (RateKink). Without the rates a change in between bends the truth away
// from the chord by at most |rate change| x (the interval) / 4, 0.25 ns for
// 0.1 ppm over 10 ms, which is why the agent samples every millisecond. Where
// REALTIME moved against RAW by more than any rate explains (a step), the
// interval is a break: nothing is mapped across it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

namespace chronolink {

// The rate a sample does not know.
inline constexpr int64_t kRateUnknown = INT64_MIN;
// The fastest a daemon slews REALTIME against RAW without a step, as a
// fraction: chronyd's default maxslewrate 83 333 ppm, the kernel PLL's
// phase chunk at time constant 0 up to 12.5 %/s of its 0.5 s MAXPHASE.
inline constexpr double kMaxSlewRate = 0.125;

struct ClockPairSample {
  int64_t realtime_ns = 0;  // the middle of the REALTIME reads around the RAW read
  int64_t raw_ns = 0;
  int64_t bracket_ns = 0;   // the width of those REALTIME reads (the sample's uncertainty)
  // REALTIME's rate against RAW there, less 1, in 1e-15 per ns, when the
  // kernel says it (a read-only adjtimex: the daemon's frequency and tick;
  // on the test bed the state file's correction): lets a knot go where the
  // rate changed rather than where the agent happened to sample.
  int64_t rate_fine = kRateUnknown;
};

// y0 + (x - x0)·(y1 - y0)/(x1 - x0) in exact integer arithmetic, rounded
// to nearest (halves away from zero); x1 != x0. The straight line between
// two samples or two knots.
int64_t Interpolate(int64_t x, int64_t x0, int64_t y0, int64_t x1, int64_t y1);

// Whether REALTIME stepped between samples a and b (b later in RAW). Where
// both know REALTIME's rate, anything the two rates cannot explain (with
// the brackets and a nanosecond's reading): a daemon's slew, however fast
// (chronyd's maxslewrate is 8.3 %, the PLL's phase up to 12.5 %/s), is not
// a step, and a step of a few µs is one. Without the rates, a rate beyond
// `max_rate`: a smaller step then passes for a slew.
bool SteppedBetween(const ClockPairSample& a, const ClockPairSample& b, double max_rate);

// Where REALTIME's rate changed between two samples that both know it: the
// point where their two lines meet, if it lies between them (else nullopt:
// more than one change, or noise). Carries b's rate.
std::optional<ClockPairSample> RateKink(const ClockPairSample& a, const ClockPairSample& b);

class RealtimeRawMap {
 public:
  // Keeps the last `capacity` samples; rates beyond `max_rate` (fraction)
  // between two samples are a step.
  explicit RealtimeRawMap(size_t capacity = 8192, double max_rate = kMaxSlewRate);

  // A sample later (in RAW) than the last one; an earlier one is ignored.
  void Add(const ClockPairSample& s);

  // RAW at a REALTIME instant within the samples kept (between two of them
  // with no break; on one exactly), else nullopt: also for a REALTIME a
  // step skipped or made the clock read twice. With *bound_ns: the samples'
  // brackets there.
  std::optional<int64_t> RawOf(int64_t realtime_ns, int64_t* bound_ns = nullptr) const;
  // REALTIME at a RAW instant, the inverse on the same terms.
  std::optional<int64_t> RealtimeOf(int64_t raw_ns) const;

  size_t size() const { return samples_.size(); }
  // Whether REALTIME stepped between sample i - 1 and sample i.
  bool BreakBefore(size_t i) const { return break_before_[i]; }
  uint64_t breaks() const { return breaks_; }
  const std::deque<ClockPairSample>& samples() const { return samples_; }

 private:
  std::deque<ClockPairSample> samples_;
  std::deque<bool> break_before_;  // a step between a sample and the one before it
  size_t capacity_;
  double max_rate_;
  uint64_t breaks_ = 0;
};

}  // namespace chronolink
