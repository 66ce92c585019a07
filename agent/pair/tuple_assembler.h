// Assembles Pt/Pr tuples of one probed edge from the pieces that arrive at
// different times: our TX stamps (error queue), the peer's RX stamps (echoed
// in its reverse pair), our RX stamps of the reverse pair, and the peer's TX
// stamps of it (interleaved in its next pair, or a follow-up). Memory is
// bounded: tuples are finalised when their window closes, when they are older
// than a timeout, or when more than a fixed number are pending. A tuple
// whose packet was seen twice (a copy or a replay: docs/bpf-tap.md) is
// spoiled: it is still handed over, so that the window counts it, but it
// never projects onto a source class and so never reaches an estimate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>

#include "agent/pair/probe_tuple.h"

namespace chronolink {

// Every stamp a tuple can collect, in both source classes.
struct FullTuple {
  uint64_t seq = 0;
  int64_t created_ns = 0;  // node clock, userspace send of forward probe 0
  DualStamp fwd_tx[2];     // ours
  DualStamp fwd_rx[2];     // peer's
  DualStamp rev_tx[2];     // peer's
  DualStamp rev_rx[2];     // ours
  bool sent[2] = {false, false};
  bool spoiled = false;  // a packet of it was seen twice: no stamp of it is trusted
  // A tuple of the peer's session mirrored into ours (ProbeEngine::MirrorSink):
  // our reverse pair as its forward half, the peer's forward pair as its
  // reverse half. Not counted among the window's own probes.
  bool peer_session = false;

  // Projects onto one source class; false if any stamp of that class is
  // absent, or the tuple is spoiled.
  bool Project(SourceClass c, PtPrTuple* out) const;
};

enum class TupleOutcome : uint8_t {
  kComplete,   // every packet arrived and every stamp is known (userspace at least)
  kTxMissing,  // every packet arrived but a TX stamp never came
  kLost,       // a probe of the forward or reverse pair never arrived, or the tuple is spoiled
};
TupleOutcome ClassifyTuple(const FullTuple& t);

class TupleAssembler {
 public:
  explicit TupleAssembler(size_t max_pending) : max_pending_(max_pending) {}

  // A new forward pair; seqs must increase. Returns the tuple to fill.
  void OnForwardSent(uint64_t seq, int index, int64_t user_tx_ns);
  void OnForwardTxStamp(uint64_t seq, int index, const ProbeStamp& kernel);
  void OnEchoedRx(uint64_t seq, const DualStamp rx[2]);
  // False when that reverse probe had been received already: a copy of an
  // authentic packet, which spoils the tuple.
  bool OnReverseRx(uint64_t seq, int index, const DualStamp& local_rx);
  void OnReverseTx(uint64_t seq, const DualStamp tx[2]);
  // A packet of tuple `seq` was seen twice by some capture point.
  void Spoil(uint64_t seq);
  // A clock stepped (ours or the peer's): every pending tuple may hold
  // stamps from both sides of the step.
  void SpoilPending();

  // Hands over (oldest first) every pending tuple for which `done` is true,
  // stopping at the first that is not. Also hands over tuples evicted
  // because more than max_pending were pending.
  void Finalize(const std::function<bool(const FullTuple&)>& done,
                const std::function<void(const FullTuple&)>& sink);

  const FullTuple* Peek(uint64_t seq) const;
  size_t pending() const { return tuples_.size(); }
  uint64_t unmatched() const { return unmatched_; }  // stamps for unknown/expired seqs
  uint64_t wrong_domain() const { return wrong_domain_; }  // stamps on the wrong clock, refused
  uint64_t spoiled() const { return spoiled_; }  // tuples spoiled by a duplicate packet
  uint64_t stepped() const { return stepped_; }  // tuples spoiled by a clock step

 private:
  FullTuple* Find(uint64_t seq) { return const_cast<FullTuple*>(Peek(seq)); }
  void Spoil(FullTuple& t);

  size_t max_pending_;
  std::deque<FullTuple> tuples_;  // consecutive seqs, oldest first
  uint64_t unmatched_ = 0;
  uint64_t wrong_domain_ = 0;
  uint64_t spoiled_ = 0;
  uint64_t stepped_ = 0;
};

}  // namespace chronolink
