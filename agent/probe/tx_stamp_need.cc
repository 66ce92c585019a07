#include "agent/probe/tx_stamp_need.h"

namespace chronolink {

void TxStampNeed::OnProbeSent() {
  if (!Wanted()) ++sent_without_;
  if (++sent_ < kBlock) return;
  wanted_ = covered_ < kBlock - kMissesAllowed;
  sent_ = 0;
  covered_ = 0;
}

void TxStampNeed::OnOtherStamp(StampSource source) {
  if (SourceRank(source) > SourceRank(StampSource::kSocketSoftware)) ++covered_;
}

}  // namespace chronolink
