// A simulated node's oscillator (docs/simulator.md): at true instant t it
// reads
//   local(t) = t + offset + drift·(t − epoch) + wander(t),
// wander being a random walk of the phase (white FM, ns/√s) plus the phase
// of a random walk of the frequency (random-walk FM, set by its Allan
// deviation at 1 s, as clock/oscillator_model.h draws the test bed's), drawn
// at fixed knots and interpolated linearly between them. Instants are int64 ns; only the
// deviation local − t, a difference, is ever a double.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace chronolink::sim {

// Values at begin + i·step (true time), straight between them and held
// before the first and after the last: an oscillator's wander, a daemon's
// correction.
class UniformKnots {
 public:
  UniformKnots(int64_t begin_ns, int64_t step_ns) : begin_ns_(begin_ns), step_ns_(step_ns) {}
  void Reserve(size_t n) { values_.reserve(n); }
  void Add(double v) { values_.push_back(v); }
  bool empty() const { return values_.empty(); }
  double At(int64_t true_ns) const {
    if (true_ns <= begin_ns_) return values_.front();
    const int64_t since = true_ns - begin_ns_;
    const auto i = static_cast<size_t>(since / step_ns_);
    if (i + 1 >= values_.size()) return values_.back();
    const double f = static_cast<double>(since % step_ns_) / static_cast<double>(step_ns_);
    return values_[i] + f * (values_[i + 1] - values_[i]);
  }

 private:
  int64_t begin_ns_, step_ns_;
  std::vector<double> values_;
};

// The true instant at which a clock `deviation(t)` off true time reads
// `reading_ns` (to 1 ns), iterated from `guess_ns`: t = reading −
// deviation(t) is a contraction, a deviation changing by far less than a ns
// per ns (drifts and slews ~1e-4).
template <typename Deviation>
int64_t TrueInstantOf(int64_t reading_ns, int64_t guess_ns, Deviation deviation) {
  int64_t t = guess_ns;
  for (int i = 0; i < 8; ++i) {
    const int64_t next = reading_ns - std::llround(deviation(t));
    if (next == t) break;
    t = next;
  }
  return t;
}

struct ClockParams {
  double offset_ns = 0;             // local − true at the epoch (before wander)
  double drift = 0;                 // d(local − true)/d(true)
  double wander_ns_per_sqrt_s = 0;  // random-walk phase noise
  double frequency_wander_adev_1s = 0;  // random-walk FM: sigma_y(1 s) (e.g. 2e-11)
};

class SimClock {
 public:
  // The wander is drawn on [begin_ns, end_ns] (true time) from `seed`; it is
  // 0 at begin_ns and held constant outside the range.
  SimClock(const ClockParams& params, int64_t epoch_ns, int64_t begin_ns, int64_t end_ns, uint64_t seed);

  // local − true at true instant t, in ns (unrounded).
  double DeviationNs(int64_t true_ns) const;
  // What the clock reads at true instant t (rounded to 1 ns, as a clock does).
  int64_t Read(int64_t true_ns) const;
  // The true instant at which the clock reads `local_ns` (to 1 ns).
  int64_t TrueInstant(int64_t local_ns) const;

  const ClockParams& params() const { return params_; }

  static constexpr int64_t kKnotNs = 50'000'000;  // wander knots every 50 ms

 private:
  ClockParams params_;
  int64_t epoch_ns_;
  UniformKnots wander_;  // every kKnotNs from begin_ns
};

}  // namespace chronolink::sim
