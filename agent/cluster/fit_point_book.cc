#include "agent/cluster/fit_point_book.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "clock/clock_trajectory.h"

namespace chronolink {

void FitPointBook::Add(const WindowSummary& w, int64_t window_ns) {
  const int64_t centre = w.window_start_ns + window_ns / 2;
  Add(w.estimate.node, w.prober_clock.value_or(FitPoint{centre, centre, 0}));
}

void FitPointBook::ExpireBefore(int64_t fit_ns) {
  for (auto it = points_.begin(); it != points_.end();) {
    auto& byfit = it->second;
    byfit.erase(byfit.begin(), byfit.lower_bound(fit_ns));
    it = byfit.empty() ? points_.erase(it) : std::next(it);
  }
}

std::optional<FitPoint> FitPointBook::Near(uint32_t node, int64_t fit_ns) const {
  const auto n = points_.find(node);
  if (n == points_.end()) return std::nullopt;
  const auto& byfit = n->second;
  auto after = byfit.lower_bound(fit_ns);
  const FitPoint* best = nullptr;
  if (after != byfit.end()) best = &after->second;
  if (after != byfit.begin()) {
    const FitPoint& before = std::prev(after)->second;
    if (best == nullptr || fit_ns - before.fit_ns < best->fit_ns - fit_ns) best = &before;
  }
  if (best == nullptr || std::llabs(best->fit_ns - fit_ns) > horizon_ns_) return std::nullopt;
  return *best;
}

bool FitPointBook::ToRealtime(OffsetsSnapshot* s) {
  const int64_t t = s->reference_instant_ns;
  struct Mapped {
    int64_t d_ns;  // REALTIME − F at the node's own instant of T
    double rate;   // REALTIME's rate against F there, less 1
  };
  std::vector<std::optional<Mapped>> mapped(s->nodes.size());
  for (size_t i = 0; i < s->nodes.size(); ++i) {
    const NodeSolution& n = s->nodes[i];
    if (!n.reachable) continue;
    const int64_t own_instant = t + static_cast<int64_t>(std::llround(n.offset_ns));
    if (const std::optional<FitPoint> p = Near(n.node, own_instant)) {
      mapped[i] = Mapped{p->RealtimeMinusFitAt(own_instant), static_cast<double>(p->rate_fine) / kFinePerNs};
    }
  }
  // The reference's d: the named node's, or the mean of the mapped nodes'
  // (the mean reference is the mean of the reachable nodes, which stay
  // reachable only where they are mapped).
  Mapped ref{0, 0};
  if (s->reference_node) {
    const std::optional<FitPoint> p = Near(*s->reference_node, t);
    if (!p) {
      ++stats_.instants_unmapped;
      return false;
    }
    ref = {p->RealtimeMinusFitAt(t), static_cast<double>(p->rate_fine) / kFinePerNs};
  } else {
    __int128 sum = 0;
    double rate_sum = 0;
    int count = 0;
    for (const auto& m : mapped) {
      if (!m) continue;
      sum += m->d_ns;
      rate_sum += m->rate;
      ++count;
    }
    if (count > 0) ref = {static_cast<int64_t>(sum / count), rate_sum / count};
  }
  double mean_shift = 0;  // the mean reference moves with the nodes it lost
  int kept = 0;
  for (size_t i = 0; i < s->nodes.size(); ++i) {
    NodeSolution& n = s->nodes[i];
    if (!n.reachable) continue;
    if (!mapped[i]) {
      ++stats_.nodes_unmapped;
      n = NodeSolution{.node = n.node};
      continue;
    }
    n.offset_ns += static_cast<double>(mapped[i]->d_ns - ref.d_ns);
    n.drift = (1 + n.drift) * (1 + mapped[i]->rate) / (1 + ref.rate) - 1;
    mean_shift += n.offset_ns;
    ++kept;
  }
  if (!s->reference_node && kept > 0) {
    // Offsets against the mean of the nodes published.
    mean_shift /= kept;
    for (NodeSolution& n : s->nodes) {
      if (n.reachable) n.offset_ns -= mean_shift;
    }
  }
  s->reference_instant_ns = t + ref.d_ns;
  return true;
}

}  // namespace chronolink
