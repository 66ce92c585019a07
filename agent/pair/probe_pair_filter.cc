#include "agent/pair/probe_pair_filter.h"

namespace chronolink {

bool ProbePairFilter::IsPure(const ProbeStamp tx[2], const ProbeStamp rx[2]) const {
  if (!tx[0].present() || !tx[1].present() || !rx[0].present() || !rx[1].present()) return false;
  // tx and rx are read on different clocks: only the spacings are compared,
  // each a same-clock difference, so the unknown offset cancels. The spacings
  // are taken in int128 so that no pair of int64 stamps can overflow.
  const __int128 tx_gap = static_cast<__int128>(tx[1].ns) - tx[0].ns;
  const __int128 rx_gap = static_cast<__int128>(rx[1].ns) - rx[0].ns;
  __int128 diff = rx_gap - tx_gap;
  if (diff < 0) diff = -diff;
  return diff <= tolerance_ns_;
}

void ProbePairFilter::Extract(const PtPrTuple& t, std::vector<OffsetBound>* upper,
                              std::vector<OffsetBound>* lower) const {
  // Only the first packet of a pure pair becomes a bound. Purity means both
  // packets saw the same delay, so the second would merely repeat the first
  // bound (and double its weight); and the second leaves right behind the
  // first, so serialisation or interrupt coalescing can touch it and not the
  // first: of the two, the first is the cleaner stamp.
  if (IsPure(t.fwd_tx, t.fwd_rx)) {
    upper->push_back({t.fwd_tx[0].ns, t.fwd_rx[0].ns - t.fwd_tx[0].ns});
  }
  if (IsPure(t.rev_tx, t.rev_rx)) {
    lower->push_back({t.rev_rx[0].ns, t.rev_tx[0].ns - t.rev_rx[0].ns});
  }
}

}  // namespace chronolink
