// One simulated probe exchange of a directed edge: the prober's coded
// forward pair and the reverse pair the responder answers with, as the
// agent's ProbeEngine runs it (docs/protocol.md), then stamped on the two
// clocks and handed to the prober's TupleAssembler the way the engine's
// message handlers hand it.
#pragma once

#include <cstdint>

#include "agent/pair/tuple_assembler.h"
#include "tools/sim/sim_link.h"
#include "tools/sim/sim_node_clock.h"
#include "tools/sim/sim_random.h"

namespace chronolink::sim {

// True instants (int64 ns) of every stamp of one exchange. "user" stamps
// are the clock reads around sendmsg/recvmsg, "kernel" ones the driver's
// software stamps, between which the link delay applies.
struct Exchange {
  int64_t fwd_user_tx[2] = {};
  int64_t fwd_kernel_tx[2] = {};
  int64_t fwd_kernel_rx[2] = {};
  int64_t fwd_user_rx[2] = {};
  bool fwd_arrived[2] = {};
  bool answered = false;  // both forward probes arrived: the responder sent its pair
  int64_t rev_user_tx[2] = {};
  int64_t rev_kernel_tx[2] = {};
  int64_t rev_kernel_rx[2] = {};
  int64_t rev_user_rx[2] = {};
  bool rev_arrived[2] = {};
};

// Host latencies around the wire, fixed by the simulator: a send's kernel
// stamp follows its userspace read by 3 µs + Exp(2 µs), a receive's
// userspace read follows the kernel stamp by 5 µs + Exp(5 µs), and the
// responder answers 10 µs + Exp(10 µs) after reading the second probe.
struct HostLatency {
  double send_ns = 3'000, send_exp_ns = 2'000;
  double receive_ns = 5'000, receive_exp_ns = 5'000;
  double turnaround_ns = 10'000, turnaround_exp_ns = 10'000;
};

// The exchange the prober starts at true instant `start_ns`; `forward_from_lo`
// says which direction of the link the forward pair takes.
Exchange SimulateExchange(int64_t start_ns, int64_t spacing_ns, const SimLink& link, bool forward_from_lo,
                          const HostLatency& host, SimRandom& rng);

// Stamps the exchange on the prober's and the responder's clocks and feeds
// it to the prober's assembler as tuple `seq`. Returns the userspace send
// stamp of the first forward probe (the tuple's created_ns).
int64_t FeedExchange(const Exchange& x, uint64_t seq, const SimNodeClock& prober, const SimNodeClock& responder,
                     TupleAssembler& assembler);

}  // namespace chronolink::sim
