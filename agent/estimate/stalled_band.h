// Tells a stalled path's window by its fit's band. When a VM stops running
// the agents for a second, its probes queue for hundreds of microseconds:
// the window's fit then has a band (uncertainty_ns, half the band of
// separating lines) hundreds of times its neighbours', and an offset as far
// off. Such a window measures neither the clocks nor the path's usual noise,
// so the window sigma's trend leaves it out (window_scatter.h). Over the
// measured windows of 13 scenarios without a stall no band passed 2.02 times
// the median of the 16 before it; w1's stall (2026-12-06) reached 864 times
// (bench/sigma_replay.py prints both; docs/estimator.md §8).
// Pure: no clocks, no I/O.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <vector>

namespace chronolink {

class StalledBandGuard {
 public:
  // factor: a band over this many times the median of the last `history`
  // bands is a stall's (infinity: never).
  StalledBandGuard(double factor, int history) : factor_(factor), history_(std::max(1, history)) {}

  // Whether the band is a stall's, against the bands before it (at least
  // kMinHistory of them, with a median above 0); kept either way, so a path
  // that stays slow is the median again within half the history.
  bool Stalled(double band_ns) {
    if (!std::isfinite(band_ns)) return false;
    bool stalled = false;
    if (static_cast<int>(bands_.size()) >= kMinHistory) {
      std::vector<double> recent(bands_.begin(), bands_.end());
      auto mid = recent.begin() + static_cast<std::ptrdiff_t>(recent.size() / 2);
      std::nth_element(recent.begin(), mid, recent.end());
      stalled = *mid > 0 && band_ns > factor_ * *mid;
    }
    bands_.push_back(band_ns);
    while (static_cast<int>(bands_.size()) > history_) bands_.pop_front();
    return stalled;
  }

  static constexpr int kMinHistory = 4;

 private:
  double factor_;
  int history_;
  std::deque<double> bands_;
};

}  // namespace chronolink
