// A complete Pt/Pr tuple: the forward coded pair (prober -> responder) and the
// reverse coded pair it triggered, with every packet's tx and rx instants in
// one source class. x-values live on the prober's clock, the responder's
// stamps on the responder's clock; nothing here is converted.
#pragma once

#include <cstdint>

#include "clock/packet_stamp.h"

namespace chronolink {

struct PtPrTuple {
  uint64_t seq = 0;
  ProbeStamp fwd_tx[2];  // prober clock
  ProbeStamp fwd_rx[2];  // responder clock
  ProbeStamp rev_tx[2];  // responder clock
  ProbeStamp rev_rx[2];  // prober clock

  bool complete() const {
    for (int i = 0; i < 2; ++i) {
      if (!fwd_tx[i].present() || !fwd_rx[i].present() || !rev_tx[i].present() ||
          !rev_rx[i].present())
        return false;
    }
    return true;
  }
};

}  // namespace chronolink
