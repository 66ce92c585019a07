// Detects steps of CLOCK_REALTIME (settimeofday, a stepping NTP daemon) by
// watching REALTIME - MONOTONIC, which only slews slowly otherwise. A window
// that contains a step is discarded, never estimated.
#pragma once

#include <cstdint>

namespace chronolink {

class ClockStepDetector {
 public:
  // A step is a change of REALTIME - MONOTONIC by more than threshold_ns
  // plus what slewing at slew_ppm could do since the previous read (NTP
  // slews at most 500 ppm): a 1 ms step is seen after up to 1.5 s of silence.
  explicit ClockStepDetector(int64_t threshold_ns = 100'000, int64_t slew_ppm = 600)
      : threshold_ns_(threshold_ns), slew_ppm_(slew_ppm) {}

  // Feed one REALTIME read bracketed by two MONOTONIC reads; true if a step
  // happened since the previous accepted read. A wide bracket (the thread was
  // preempted between the reads, common on a loaded VM) says nothing and is
  // ignored, or every vCPU stall would look like a step.
  bool Update(int64_t mono_before_ns, int64_t realtime_ns, int64_t mono_after_ns) {
    if (mono_after_ns - mono_before_ns > kMaxBracketNs) return false;
    const int64_t monotonic_ns = mono_before_ns + (mono_after_ns - mono_before_ns) / 2;
    const int64_t diff = realtime_ns - monotonic_ns;
    const int64_t allowed = threshold_ns_ + (monotonic_ns - last_monotonic_ns_) / 1'000'000 * slew_ppm_;
    const bool step = primed_ && (diff - last_diff_ > allowed || last_diff_ - diff > allowed);
    last_step_ns_ = step ? diff - last_diff_ : 0;
    last_diff_ = diff;
    last_monotonic_ns_ = monotonic_ns;
    primed_ = true;
    return step;
  }
  // The size of the step Update last reported (REALTIME forwards > 0).
  int64_t last_step_ns() const { return last_step_ns_; }

 private:
  static constexpr int64_t kMaxBracketNs = 50'000;
  int64_t threshold_ns_;
  int64_t slew_ppm_;
  int64_t last_diff_ = 0;
  int64_t last_monotonic_ns_ = 0;
  int64_t last_step_ns_ = 0;
  bool primed_ = false;
};

}  // namespace chronolink
