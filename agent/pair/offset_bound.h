// The estimator's input: points (x, y) where x is an instant on the local
// (prober) clock and y bounds the peer's offset (peer - local) from above
// (forward probes: rx_peer - tx_local) or from below (reverse probes:
// tx_peer - rx_local).
#pragma once

#include <cstdint>

namespace chronolink {

struct OffsetBound {
  int64_t x_ns;
  int64_t y_ns;
};

}  // namespace chronolink
