#include "agent/pair/tuple_assembler.h"

namespace chronolink {

bool FullTuple::Project(SourceClass c, PtPrTuple* out) const {
  out->seq = seq;
  if (spoiled) return false;
  for (int i = 0; i < 2; ++i) {
    out->fwd_tx[i] = fwd_tx[i].Of(c);
    out->fwd_rx[i] = fwd_rx[i].Of(c);
    out->rev_tx[i] = rev_tx[i].Of(c);
    out->rev_rx[i] = rev_rx[i].Of(c);
  }
  return out->complete();
}

TupleOutcome ClassifyTuple(const FullTuple& t) {
  if (t.spoiled) return TupleOutcome::kLost;
  for (int i = 0; i < 2; ++i) {
    // A packet that arrived always has a userspace receive stamp.
    if (!t.fwd_rx[i].user.present() || !t.rev_rx[i].user.present()) return TupleOutcome::kLost;
  }
  for (int i = 0; i < 2; ++i) {
    if (!t.fwd_tx[i].kernel.present() || !t.rev_tx[i].kernel.present() ||
        !t.rev_tx[i].user.present())
      return TupleOutcome::kTxMissing;
  }
  return TupleOutcome::kComplete;
}

const FullTuple* TupleAssembler::Peek(uint64_t seq) const {
  if (tuples_.empty() || seq < tuples_.front().seq) return nullptr;
  const uint64_t i = seq - tuples_.front().seq;
  if (i >= tuples_.size()) return nullptr;
  return &tuples_[i];
}

void TupleAssembler::OnForwardSent(uint64_t seq, int index, int64_t user_tx_ns) {
  FullTuple* t = Find(seq);
  if (t == nullptr) {
    // Keep the deque dense: seqs are consecutive within one session.
    if (!tuples_.empty() && seq != tuples_.back().seq + 1) {
      tuples_.clear();  // caller restarted its numbering; old tuples are unreachable
    }
    tuples_.emplace_back();
    t = &tuples_.back();
    t->seq = seq;
    t->created_ns = user_tx_ns;
  }
  t->fwd_tx[index].user = {user_tx_ns, StampSource::kUserspace};
  t->sent[index] = true;
}

void TupleAssembler::OnForwardTxStamp(uint64_t seq, int index, const ProbeStamp& kernel) {
  FullTuple* t = Find(seq);
  if (kernel.domain != ClockDomain::kNodeRealtime) {
    ++wrong_domain_;
    return;
  }
  if (t == nullptr) {
    ++unmatched_;
    return;
  }
  t->fwd_tx[index].Merge(DualStamp{kernel, {}}, StampDirection::kTransmit);
}

void TupleAssembler::OnEchoedRx(uint64_t seq, const DualStamp rx[2]) {
  FullTuple* t = Find(seq);
  if (!rx[0].InDomain(ClockDomain::kPeerRealtime) || !rx[1].InDomain(ClockDomain::kPeerRealtime)) {
    ++wrong_domain_;
    return;
  }
  if (t == nullptr) {
    ++unmatched_;
    return;
  }
  t->fwd_rx[0].Merge(rx[0], StampDirection::kReceive);
  t->fwd_rx[1].Merge(rx[1], StampDirection::kReceive);
}

bool TupleAssembler::OnReverseRx(uint64_t seq, int index, const DualStamp& local_rx) {
  FullTuple* t = Find(seq);
  if (!local_rx.InDomain(ClockDomain::kNodeRealtime)) {
    ++wrong_domain_;
    return true;
  }
  if (t == nullptr) {
    ++unmatched_;
    return true;
  }
  // Every received packet has a userspace stamp: one already there means
  // this is the second copy, and which one was the peer's is unknowable.
  if (t->rev_rx[index].user.present()) {
    Spoil(*t);
    return false;
  }
  t->rev_rx[index].Merge(local_rx, StampDirection::kReceive);
  return true;
}

void TupleAssembler::OnReverseTx(uint64_t seq, const DualStamp tx[2]) {
  FullTuple* t = Find(seq);
  if (!tx[0].InDomain(ClockDomain::kPeerRealtime) || !tx[1].InDomain(ClockDomain::kPeerRealtime)) {
    ++wrong_domain_;
    return;
  }
  if (t == nullptr) {
    ++unmatched_;
    return;
  }
  t->rev_tx[0].Merge(tx[0], StampDirection::kTransmit);
  t->rev_tx[1].Merge(tx[1], StampDirection::kTransmit);
}

void TupleAssembler::Spoil(uint64_t seq) {
  if (FullTuple* t = Find(seq)) Spoil(*t);
}

void TupleAssembler::SpoilPending() {
  for (FullTuple& t : tuples_) {
    if (!t.spoiled) ++stepped_;
    t.spoiled = true;
  }
}

void TupleAssembler::Spoil(FullTuple& t) {
  if (!t.spoiled) ++spoiled_;
  t.spoiled = true;
}

void TupleAssembler::Finalize(const std::function<bool(const FullTuple&)>& done,
                              const std::function<void(const FullTuple&)>& sink) {
  while (!tuples_.empty() && (tuples_.size() > max_pending_ || done(tuples_.front()))) {
    sink(tuples_.front());
    tuples_.pop_front();
  }
}

}  // namespace chronolink
