#include "tools/sim/sim_exchange.h"

#include <algorithm>
#include <cmath>

namespace chronolink::sim {
namespace {

int64_t Latency(double fixed_ns, double exp_mean_ns, SimRandom& rng) {
  return std::llround(fixed_ns + rng.Exponential(exp_mean_ns));
}

// A kernel (driver software) stamp, as the capture path reports it.
ProbeStamp Kernel(int64_t ns, ClockDomain domain) {
  return {ns, StampSource::kSocketSoftware, domain};
}
ProbeStamp User(int64_t ns, ClockDomain domain) {
  return {ns, StampSource::kUserspace, domain};
}

}  // namespace

Exchange SimulateExchange(int64_t start_ns, int64_t spacing_ns, const SimLink& link, bool forward_from_lo,
                          const HostLatency& host, SimRandom& rng) {
  Exchange x;
  PacketDelay fwd[2], rev[2];
  link.PairDelays(forward_from_lo, rng, fwd);
  x.fwd_user_tx[0] = start_ns;
  x.fwd_user_tx[1] = start_ns + spacing_ns;
  for (int i = 0; i < 2; ++i) {
    x.fwd_kernel_tx[i] = x.fwd_user_tx[i] + Latency(host.send_ns, host.send_exp_ns, rng);
    x.fwd_kernel_rx[i] = x.fwd_kernel_tx[i] + fwd[i].ns;
    x.fwd_user_rx[i] = x.fwd_kernel_rx[i] + Latency(host.receive_ns, host.receive_exp_ns, rng);
    x.fwd_arrived[i] = !fwd[i].lost;
  }
  // The responder answers once it has read both probes of the pair.
  x.answered = x.fwd_arrived[0] && x.fwd_arrived[1];
  if (!x.answered) return x;
  link.PairDelays(!forward_from_lo, rng, rev);
  x.rev_user_tx[0] =
      std::max(x.fwd_user_rx[0], x.fwd_user_rx[1]) + Latency(host.turnaround_ns, host.turnaround_exp_ns, rng);
  x.rev_user_tx[1] = x.rev_user_tx[0] + spacing_ns;
  for (int i = 0; i < 2; ++i) {
    x.rev_kernel_tx[i] = x.rev_user_tx[i] + Latency(host.send_ns, host.send_exp_ns, rng);
    x.rev_kernel_rx[i] = x.rev_kernel_tx[i] + rev[i].ns;
    x.rev_user_rx[i] = x.rev_kernel_rx[i] + Latency(host.receive_ns, host.receive_exp_ns, rng);
    x.rev_arrived[i] = !rev[i].lost;
  }
  return x;
}

int64_t FeedExchange(const Exchange& x, uint64_t seq, const SimNodeClock& prober, const SimNodeClock& responder,
                     TupleAssembler& assembler) {
  constexpr ClockDomain kOwn = ClockDomain::kNodeRealtime;
  constexpr ClockDomain kPeer = ClockDomain::kPeerRealtime;
  auto P = [&](int64_t t) { return prober.Read(t); };
  auto R = [&](int64_t t) { return responder.Read(t); };
  const int64_t created = P(x.fwd_user_tx[0]);
  for (int i = 0; i < 2; ++i) {
    assembler.OnForwardSent(seq, i, P(x.fwd_user_tx[i]));
    assembler.OnForwardTxStamp(seq, i, Kernel(P(x.fwd_kernel_tx[i]), kOwn));
  }
  if (!x.answered) return created;
  // Every reverse packet echoes the responder's receive stamps of the
  // forward pair; its own send stamps follow in its next pair or a
  // follow-up, which the simulator lets arrive.
  DualStamp echo[2], rev_tx[2];
  for (int i = 0; i < 2; ++i) {
    echo[i] = {Kernel(R(x.fwd_kernel_rx[i]), kPeer), User(R(x.fwd_user_rx[i]), kPeer)};
    rev_tx[i] = {Kernel(R(x.rev_kernel_tx[i]), kPeer), User(R(x.rev_user_tx[i]), kPeer)};
  }
  for (int i = 0; i < 2; ++i) {
    if (!x.rev_arrived[i]) continue;
    assembler.OnEchoedRx(seq, echo);
    assembler.OnReverseRx(seq, i, {Kernel(P(x.rev_kernel_rx[i]), kOwn), User(P(x.rev_user_rx[i]), kOwn)});
  }
  assembler.OnReverseTx(seq, rev_tx);
  return created;
}

}  // namespace chronolink::sim
