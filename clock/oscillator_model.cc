#include "clock/oscillator_model.h"

#include <cmath>
#include <random>

namespace chronolink {

ClockTrajectory OscillatorTrajectory(const OscillatorParams& p, int64_t start_ns, int64_t end_ns) {
  std::mt19937_64 rng(p.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const double h_s = static_cast<double>(p.knot_interval_ns) * 1e-9;
  // White FM: the phase over h is a normal step of variance adev²·1 s·h
  // (sigma_y(tau)² = adev² / tau for a phase random walk), so the segment's
  // mean frequency has sigma adev / sqrt(h).
  const double white_sigma = p.white_fm_adev_1s / std::sqrt(h_s);
  // Random-walk FM: sigma_y(tau)² = q²·tau/3 for a frequency random walk of
  // diffusion q², so q = sqrt(3)·adev at 1 s, and a step over h has sigma
  // q·sqrt(h).
  const double walk_sigma = std::sqrt(3.0) * p.random_walk_fm_adev_1s * std::sqrt(h_s);
  double walk = 0.0;
  auto slope = [&](double y) {
    return kFinePerNs + static_cast<int64_t>(std::llround((p.frequency_ppm * 1e-6 + y) * 1e15));
  };
  const double first = p.IsLinear() ? 0.0 : white_sigma * normal(rng);
  ClockTrajectory clock(start_ns, start_ns + p.offset_ns, slope(first));
  if (p.IsLinear()) return clock;
  for (int64_t t = start_ns + p.knot_interval_ns; t - p.knot_interval_ns < end_ns; t += p.knot_interval_ns) {
    walk += walk_sigma * normal(rng);
    clock.ChangeAt(t, slope(walk + white_sigma * normal(rng)));
  }
  return clock;
}

}  // namespace chronolink
