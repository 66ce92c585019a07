#include "tools/sim/sim_clock.h"

#include <cmath>

#include "tools/sim/sim_random.h"

namespace chronolink::sim {

SimClock::SimClock(const ClockParams& params, int64_t epoch_ns, int64_t begin_ns, int64_t end_ns,
                   uint64_t seed)
    : params_(params), epoch_ns_(epoch_ns), begin_ns_(begin_ns) {
  const int64_t count = (end_ns - begin_ns) / kKnotNs + 2;
  knots_.reserve(static_cast<size_t>(count));
  // A random walk: independent normal steps of sigma·√(knot spacing).
  const double h_s = static_cast<double>(kKnotNs) * 1e-9;
  const double step_sigma = params.wander_ns_per_sqrt_s * std::sqrt(h_s);
  // Random-walk FM: sigma_y(tau)² = q²·tau/3, so q = √3·adev at 1 s and the
  // frequency steps by q·√h per knot (as clock/oscillator_model.cc).
  const double frequency_sigma = std::sqrt(3.0) * params.frequency_wander_adev_1s * std::sqrt(h_s);
  SimRandom rng(seed);
  double w = 0, frequency = 0;
  for (int64_t i = 0; i < count; ++i) {
    knots_.push_back(w);
    if (step_sigma > 0) w += step_sigma * rng.Normal();
    if (frequency_sigma > 0) {
      w += frequency * static_cast<double>(kKnotNs);
      frequency += frequency_sigma * rng.Normal();
    }
  }
}

double SimClock::WanderNs(int64_t true_ns) const {
  if (true_ns <= begin_ns_) return knots_.front();
  const int64_t since = true_ns - begin_ns_;
  const auto i = static_cast<size_t>(since / kKnotNs);
  if (i + 1 >= knots_.size()) return knots_.back();
  const double f = static_cast<double>(since % kKnotNs) / static_cast<double>(kKnotNs);
  return knots_[i] + f * (knots_[i + 1] - knots_[i]);
}

double SimClock::DeviationNs(int64_t true_ns) const {
  return params_.offset_ns + params_.drift * static_cast<double>(true_ns - epoch_ns_) + WanderNs(true_ns);
}

int64_t SimClock::Read(int64_t true_ns) const {
  return true_ns + std::llround(DeviationNs(true_ns));
}

int64_t SimClock::TrueInstant(int64_t local_ns) const {
  // Fixed point of t = local − deviation(t): a contraction, since the
  // deviation changes by far less than a ns per ns (drift ~1e-4).
  int64_t t = local_ns - std::llround(params_.offset_ns);
  for (int i = 0; i < 8; ++i) {
    const int64_t next = local_ns - std::llround(DeviationNs(t));
    if (next == t) break;
    t = next;
  }
  return t;
}

}  // namespace chronolink::sim
