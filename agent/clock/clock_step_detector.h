// Detects steps of CLOCK_REALTIME (settimeofday, a stepping NTP daemon) by
// watching REALTIME - MONOTONIC, which only slews slowly otherwise. A window
// that contains a step is discarded, never estimated.
#pragma once

#include <cstdint>

namespace chronolink {

class ClockStepDetector {
 public:
  explicit ClockStepDetector(int64_t threshold_ns = 1'000'000) : threshold_ns_(threshold_ns) {}

  // Feed one (realtime, monotonic) read pair; true if a step happened since
  // the previous one.
  bool Update(int64_t realtime_ns, int64_t monotonic_ns) {
    const int64_t diff = realtime_ns - monotonic_ns;
    const bool step = primed_ && (diff - last_diff_ > threshold_ns_ || last_diff_ - diff > threshold_ns_);
    last_diff_ = diff;
    primed_ = true;
    return step;
  }

 private:
  int64_t threshold_ns_;
  int64_t last_diff_ = 0;
  bool primed_ = false;
};

}  // namespace chronolink
