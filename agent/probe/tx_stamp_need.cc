#include "agent/probe/tx_stamp_need.h"

namespace chronolink {

void TxStampNeed::OnProbeSent() {
  if (!Wanted()) ++sent_without_;
  if (++sent_ >= kBlock) EndBlock();
}

void TxStampNeed::EndBlock() {
  if (block_socket_software_) {
    socket_best_ = StampSource::kSocketSoftware;
  } else if (wanted_ && block_socket_any_) {
    socket_best_ = StampSource::kSocketSched;  // asked for a whole block: the driver gives no TX_SOFTWARE
  }
  wanted_ = covered_ < kBlock - kMissesAllowed;
  sent_ = 0;
  covered_ = 0;
  block_socket_any_ = false;
  block_socket_software_ = false;
}

void TxStampNeed::OnSocketStamp(StampSource source) {
  block_socket_any_ = true;
  if (source == StampSource::kSocketSoftware) block_socket_software_ = true;
}

void TxStampNeed::OnOtherStamp(StampSource source) {
  if (SourceRank(source, StampDirection::kTransmit) > SourceRank(socket_best_, StampDirection::kTransmit)) {
    ++covered_;
  }
}

}  // namespace chronolink
