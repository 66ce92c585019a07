// A free-running oscillator's clock for the test bed and the simulator: a
// constant frequency error plus the two noises a server's crystal shows over
// seconds to hours (IEEE 1139 power-law terms), set by their Allan
// deviations at 1 s:
//   - white frequency noise, a random walk of the phase:
//       sigma_y(tau) = white_fm_adev_1s / sqrt(tau)
//   - random-walk frequency noise (temperature, ageing), the frequency
//     wandering:
//       sigma_y(tau) = random_walk_fm_adev_1s * sqrt(tau)
// drawn as a ClockTrajectory with a knot every knot_interval_ns (the slope of
// each segment the frequency over it). Seeded: the same parameters give the
// same knots on every run, and the test bed writes them out for every
// process of the node (and the truth) to read.
#pragma once

#include <cstdint>

#include "clock/clock_trajectory.h"

namespace chronolink {

struct OscillatorParams {
  int64_t offset_ns = 0;            // the reading minus true time at start
  double frequency_ppm = 0.0;       // the constant part of the frequency error
  double white_fm_adev_1s = 0.0;    // sigma_y(1 s) of white FM (e.g. 1e-9)
  double random_walk_fm_adev_1s = 0.0;  // sigma_y(1 s) of random-walk FM (e.g. 1e-11)
  int64_t knot_interval_ns = 250'000'000;
  uint64_t seed = 1;

  bool IsLinear() const { return white_fm_adev_1s == 0.0 && random_walk_fm_adev_1s == 0.0; }
};

// The oscillator's trajectory from true start_ns to at least end_ns.
ClockTrajectory OscillatorTrajectory(const OscillatorParams& p, int64_t start_ns, int64_t end_ns);

}  // namespace chronolink
