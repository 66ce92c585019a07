// Each prober's REALTIME against its fit clock, as its window summaries
// brought it (clock/fit_point.h), and the mapping of a solution solved on
// the fit clocks back to REALTIME (docs/leader.md "From fit clocks to
// REALTIME"):
//
//   REALTIME_n − REALTIME_ref = (F_n − F_ref) + d_n − d_ref,  d = REALTIME − F,
//
// each d at the node's own instant of T. A point is used only within the
// solve's validity horizon of T: REALTIME's rate changes with every
// daemon update, so an older point would err by the change × the distance.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "agent/cluster/cluster_messages.h"
#include "clock/fit_point.h"

namespace chronolink {

struct FitPointBookStats {
  uint64_t nodes_unmapped = 0;      // solved, but no point of theirs near T: published unreachable
  uint64_t instants_unmapped = 0;   // the named reference had no point near T: not published
};

class FitPointBook {
 public:
  explicit FitPointBook(int64_t horizon_ns) : horizon_ns_(horizon_ns) {}

  // The point of a summary (the identity at its window centre when it has
  // none: the prober fits in REALTIME).
  void Add(const WindowSummary& w, int64_t window_ns);
  void Add(uint32_t node, const FitPoint& p) { points_[node][p.fit_ns] = p; }
  void ExpireBefore(int64_t fit_ns);

  // Maps snapshot `s`, solved at T = s->reference_instant_ns on the fit
  // clocks, to REALTIME: offsets, drifts and T itself. False when the
  // named reference has no point near T (nothing can be said in REALTIME).
  bool ToRealtime(OffsetsSnapshot* s);

  const FitPointBookStats& stats() const { return stats_; }

 private:
  std::optional<FitPoint> Near(uint32_t node, int64_t fit_ns) const;

  int64_t horizon_ns_;
  std::map<uint32_t, std::map<int64_t, FitPoint>> points_;  // node -> fit_ns -> point
  FitPointBookStats stats_;
};

}  // namespace chronolink
