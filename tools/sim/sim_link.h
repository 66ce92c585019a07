// A simulated link between two nodes (docs/simulator.md): each packet's
// one-way delay is the link's base delay, ± half its asymmetry depending on
// the direction, plus wire jitter, plus queueing. Queueing is what makes a
// coded pair impure: a packet finds the queue empty (no extra delay) with
// probability idle_fraction, else waits Exp(queue_mean); occasionally a
// burst delays both packets of a pair alike (the pair stays pure but its
// bound is loose, as after a long queue that both packets sat in).
#pragma once

#include <cstdint>

#include "tools/sim/sim_random.h"

namespace chronolink::sim {

struct QueueParams {
  double jitter_ns = 50;           // uniform [0, jitter) per packet
  double idle_fraction = 0.4;      // a packet finds the queue empty
  double queue_mean_ns = 20'000;   // otherwise it waits Exp(mean)
  double burst_fraction = 0.01;    // a pair hits a burst ...
  double burst_mean_ns = 500'000;  // ... adding Exp(mean) to both packets
  double loss_fraction = 0.0;      // a packet is lost
};

struct LinkParams {
  double base_ns = 50'000;  // mean of the two directions' fixed delays
  double asymmetry_ns = 0;  // fixed delay lo→hi minus hi→lo
};

// One packet's fate: delay in ns, or lost.
struct PacketDelay {
  int64_t ns = 0;
  bool lost = false;
};

class SimLink {
 public:
  // Each direction's fixed delay is floored at 1 µs: asymmetry larger than
  // twice the base would otherwise ask for a negative delay.
  SimLink(const LinkParams& link, const QueueParams& queue);

  // The delays of the two packets of one coded pair, sent from the lower id
  // to the higher (`from_lo`) or back.
  void PairDelays(bool from_lo, SimRandom& rng, PacketDelay out[2]) const;

  double FixedDelayNs(bool from_lo) const { return from_lo ? fixed_lo_hi_ns_ : fixed_hi_lo_ns_; }

  static constexpr double kMinFixedDelayNs = 1'000;

 private:
  QueueParams queue_;
  double fixed_lo_hi_ns_;
  double fixed_hi_lo_ns_;
};

}  // namespace chronolink::sim
