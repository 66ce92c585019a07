#include "tools/sim/sim_link.h"

#include <algorithm>
#include <cmath>

namespace chronolink::sim {

SimLink::SimLink(const LinkParams& link, const QueueParams& queue)
    : queue_(queue),
      fixed_lo_hi_ns_(std::max(kMinFixedDelayNs, link.base_ns + link.asymmetry_ns / 2)),
      fixed_hi_lo_ns_(std::max(kMinFixedDelayNs, link.base_ns - link.asymmetry_ns / 2)) {}

void SimLink::PairDelays(bool from_lo, SimRandom& rng, PacketDelay out[2]) const {
  const double burst = rng.Chance(queue_.burst_fraction) ? rng.Exponential(queue_.burst_mean_ns) : 0.0;
  for (int i = 0; i < 2; ++i) {
    double d = FixedDelayNs(from_lo) + burst + rng.Uniform(0, queue_.jitter_ns);
    if (!rng.Chance(queue_.idle_fraction)) d += rng.Exponential(queue_.queue_mean_ns);
    out[i].ns = std::llround(d);
    out[i].lost = rng.Chance(queue_.loss_fraction);
  }
}

}  // namespace chronolink::sim
