// Where an edge's clocks stepped: windows discarded because the prober's
// clock or its peer's stepped (docs/clocks.md "Steps"). An estimate of that
// edge describes the clocks on its own side of the step only, so it is not
// used for an instant on the other side. Shared by the leader and
// chronolink-solve; pure logic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>

#include "agent/solve/global_solver.h"

namespace chronolink {

class ClockStepBarriers {
 public:
  // The directed edge's window [start, end) (prober clock) held a step.
  // False when it was known already (a resend).
  bool Add(uint32_t node, uint32_t peer, int64_t start_ns, int64_t end_ns) {
    for (auto [it, last] = by_start_.equal_range(start_ns); it != last; ++it) {
      if (it->second.node == node && it->second.peer == peer) return false;
    }
    by_start_.emplace(start_ns, Span{node, peer, start_ns, end_ns});
    longest_ns_ = std::max(longest_ns_, end_ns - start_ns);
    return true;
  }

  // Whether a step of e's edge lies between its x0 and t.
  bool Crosses(const EdgeEstimate& e, int64_t t_ns) const {
    const int64_t lo = std::min(e.x0_ns, t_ns), hi = std::max(e.x0_ns, t_ns);
    for (auto it = by_start_.lower_bound(lo - longest_ns_); it != by_start_.end() && it->first <= hi; ++it) {
      const Span& s = it->second;
      if (s.node == e.node && s.peer == e.peer && lo < s.end) return true;
    }
    return false;
  }

  // Forgets steps that ended before `before_ns`.
  void ExpireBefore(int64_t before_ns) { by_start_.erase(by_start_.begin(), by_start_.lower_bound(before_ns - longest_ns_)); }
  size_t size() const { return by_start_.size(); }

 private:
  struct Span {
    uint32_t node, peer;
    int64_t start, end;
  };
  std::multimap<int64_t, Span> by_start_;
  int64_t longest_ns_ = 0;
};

}  // namespace chronolink
