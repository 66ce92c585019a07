// Detects steps of CLOCK_REALTIME (settimeofday, a stepping NTP daemon) by
// watching REALTIME - MONOTONIC, which only slews slowly otherwise. A window
// that contains a step is discarded, never estimated.
#pragma once

#include <cstdint>

namespace chronolink {

class ClockStepDetector {
 public:
  explicit ClockStepDetector(int64_t threshold_ns = 1'000'000) : threshold_ns_(threshold_ns) {}

  // Feed one REALTIME read bracketed by two MONOTONIC reads; true if a step
  // happened since the previous accepted read. A wide bracket (the thread was
  // preempted between the reads, common on a loaded VM) says nothing and is
  // ignored, or every vCPU stall would look like a step.
  bool Update(int64_t mono_before_ns, int64_t realtime_ns, int64_t mono_after_ns) {
    if (mono_after_ns - mono_before_ns > kMaxBracketNs) return false;
    const int64_t monotonic_ns = mono_before_ns + (mono_after_ns - mono_before_ns) / 2;
    const int64_t diff = realtime_ns - monotonic_ns;
    const bool step = primed_ && (diff - last_diff_ > threshold_ns_ || last_diff_ - diff > threshold_ns_);
    last_diff_ = diff;
    primed_ = true;
    return step;
  }

 private:
  static constexpr int64_t kMaxBracketNs = 50'000;
  int64_t threshold_ns_;
  int64_t last_diff_ = 0;
  bool primed_ = false;
};

}  // namespace chronolink
