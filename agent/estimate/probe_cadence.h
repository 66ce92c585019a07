// How fast one edge needs probing, judged from its closed windows: probe
// only as fast as the estimate needs (docs/user-guide.md "Probe cadence").
// The configured interval is the slowest; a window that had to fall back to
// the minimum-delay filter (or had nothing) halves the interval, a
// max-margin window resting on fewer pure points per side than the target
// (or wider than the target uncertainty, when one is set) shortens it by a
// fifth, and every window that meets both lengthens it by a quarter, back
// towards the configured one, never below the fastest.
// A window fitted on every probe (the default, docs/estimator.md §6) rests
// on no pure pair, so pure pairs do not pace it: it meets the target unless
// it is wider than the target uncertainty. Chasing pure pairs there sped
// edges up to 13-20 ms for nothing the fit used, past the 40 kB/s traffic
// target (46 kB/s at 90 % load on the test bed, PERFORMANCE §3).
// Except on a loaded path: where under a tenth of the pairs stay pure,
// cross traffic queues the probes, and probing faster costs in proportion
// while buying little (the fit on every probe needs no pure pairs): at 90 %
// load on the test bed chasing pure pairs pinned the edge at the fastest
// interval for 5.8 % of a core instead of 1.3 % (PERFORMANCE §3). The
// interval is then held. Pure: no clocks, no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "agent/estimate/window_estimator.h"

namespace chronolink {

struct ProbeCadenceOptions {
  int64_t slowest_interval_ns = 20'000'000;
  int64_t fastest_interval_ns = 2'500'000;
  int target_pure_points = 16;        // per side, in a max-margin window on pure pairs
  double target_uncertainty_ns = 0;   // 0: none
  // The estimator fits every probe first: a kMaxMargin window then rests on
  // every probe, not on pure pairs (WindowEstimatorOptions::fit_every_probe).
  bool every_probe_fit = true;
};

class ProbeCadence {
 public:
  // Below this share of pure pairs (thinner side, of the complete tuples)
  // a path counts as loaded.
  static constexpr double kLoadedPurity = 0.10;

  explicit ProbeCadence(const ProbeCadenceOptions& options)
      : options_(options), interval_ns_(options.slowest_interval_ns) {}

  int64_t interval_ns() const { return interval_ns_; }
  // Feeds one closed window (windows spoiled by a clock step are skipped);
  // returns true when the interval changed, with the reason in *why.
  bool OnWindow(const WindowEstimate& estimate, bool clock_step, std::string* why);

 private:
  bool SetInterval(double ns, std::string* why, const std::string& reason);

  ProbeCadenceOptions options_;
  int64_t interval_ns_;
};

}  // namespace chronolink
