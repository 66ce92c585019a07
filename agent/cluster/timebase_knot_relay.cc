#include "agent/cluster/timebase_knot_relay.h"

namespace chronolink {

void TimebaseKnotRelay::Add(const WindowSummary& w) {
  if (!w.prober_knots || w.prober_knots->knots.empty()) return;
  const std::vector<TimebaseKnot>& knots = w.prober_knots->knots;
  const size_t decided = knots.size() - (w.prober_knots->last_provisional ? 1 : 0);
  const auto [it, first] = last_raw_.try_emplace({w.estimate.node, w.session}, INT64_MIN);
  int64_t& last = it->second;
  // Knots overlap from one window to the next: the one holding a window's
  // start is the previous window's, at or before its end.
  bool gap = !first && knots.front().raw_ns > last;
  for (size_t i = 0; i < decided; ++i) {
    if (knots[i].raw_ns <= last) continue;
    pending_.push_back({w.estimate.node, w.session, knots[i], gap});
    gap = false;
    last = knots[i].raw_ns;
  }
}

std::vector<RelayedKnot> TimebaseKnotRelay::Take() { return std::exchange(pending_, {}); }

}  // namespace chronolink
