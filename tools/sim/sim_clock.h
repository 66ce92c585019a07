// A simulated node's oscillator (docs/simulator.md): at true instant t it
// reads
//   local(t) = t + offset + drift·(t − epoch) + wander(t),
// wander being a random walk of the phase (white FM, ns/√s) plus the phase
// of a random walk of the frequency (random-walk FM, set by its Allan
// deviation at 1 s, as clock/oscillator_model.h draws the test bed's), drawn
// at fixed knots and interpolated linearly between them. Instants are int64 ns; only the
// deviation local − t, a difference, is ever a double.
#pragma once

#include <cstdint>
#include <vector>

namespace chronolink::sim {

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
  double WanderNs(int64_t true_ns) const;

  ClockParams params_;
  int64_t epoch_ns_;
  int64_t begin_ns_;
  std::vector<double> knots_;  // wander at begin_ns + i·kKnotNs
};

}  // namespace chronolink::sim
