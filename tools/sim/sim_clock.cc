#include "tools/sim/sim_clock.h"

#include <cmath>

#include "tools/sim/sim_random.h"

namespace chronolink::sim {

SimClock::SimClock(const ClockParams& params, int64_t epoch_ns, int64_t begin_ns, int64_t end_ns,
                   uint64_t seed)
    : params_(params), epoch_ns_(epoch_ns), wander_(begin_ns, kKnotNs) {
  const int64_t count = (end_ns - begin_ns) / kKnotNs + 2;
  wander_.Reserve(static_cast<size_t>(count));
  // A random walk: independent normal steps of sigma·√(knot spacing).
  const double h_s = static_cast<double>(kKnotNs) * 1e-9;
  const double step_sigma = params.wander_ns_per_sqrt_s * std::sqrt(h_s);
  // Random-walk FM: sigma_y(tau)² = q²·tau/3, so q = √3·adev at 1 s and the
  // frequency steps by q·√h per knot (as clock/oscillator_model.cc).
  const double frequency_sigma = std::sqrt(3.0) * params.frequency_wander_adev_1s * std::sqrt(h_s);
  SimRandom rng(seed);
  double w = 0, frequency = 0;
  for (int64_t i = 0; i < count; ++i) {
    wander_.Add(w);
    if (step_sigma > 0) w += step_sigma * rng.Normal();
    if (frequency_sigma > 0) {
      w += frequency * static_cast<double>(kKnotNs);
      frequency += frequency_sigma * rng.Normal();
    }
  }
}

double SimClock::DeviationNs(int64_t true_ns) const {
  return params_.offset_ns + params_.drift * static_cast<double>(true_ns - epoch_ns_) + wander_.At(true_ns);
}

int64_t SimClock::Read(int64_t true_ns) const {
  return true_ns + std::llround(DeviationNs(true_ns));
}

int64_t SimClock::TrueInstant(int64_t local_ns) const {
  return TrueInstantOf(local_ns, local_ns - std::llround(params_.offset_ns),
                       [this](int64_t t) { return DeviationNs(t); });
}

}  // namespace chronolink::sim
