#include "agent/cluster/page_drift_history.h"

#include <algorithm>
#include <cmath>

namespace chronolink {

void PageDriftHistory::Apply(int64_t t_ns, std::vector<NodeSolution>* nodes) {
  if (options_.span_ns <= 0) return;
  if (t_ns > newest_ns_) {
    newest_ns_ = t_ns;
    Forget(t_ns - 2 * options_.span_ns);
  }
  for (NodeSolution& n : *nodes) {
    // Solved again, the instant's point goes, whatever replaces it.
    if (const auto had = by_node_.find(n.node); had != by_node_.end()) had->second.erase(t_ns);
    if (!n.reachable || !(n.uncertainty_ns <= options_.max_sigma_ns)) continue;
    Points& points = by_node_[n.node];
    if (!KeepToStepsSideOf(n.node, t_ns, &points)) continue;
    if (OffTheLine(points, t_ns, n)) points.clear();
    points[t_ns] = n.offset_ns;
    double slope = 0, at = 0;
    if (Line(points, t_ns + 1, &slope, &at)) n.page_drift = slope;
  }
}

void PageDriftHistory::NoteStep(uint32_t node, int64_t from_ns, int64_t to_ns) {
  auto& steps = steps_[node];
  auto [it, added] = steps.emplace(from_ns, to_ns);
  if (!added) it->second = std::max(it->second, to_ns);
}

bool PageDriftHistory::KeepToStepsSideOf(uint32_t node, int64_t t_ns, Points* points) const {
  const auto found = steps_.find(node);
  if (found == steps_.end()) return true;
  for (const auto& [from, to] : found->second) {
    if (t_ns >= from && t_ns <= to) return false;
    if (t_ns > to) {
      points->erase(points->begin(), points->upper_bound(to));
    } else {
      points->erase(points->lower_bound(from), points->end());
    }
  }
  return true;
}

bool PageDriftHistory::OffTheLine(const Points& points, int64_t t_ns, const NodeSolution& n) const {
  double slope = 0, predicted = 0;
  if (!Line(points, t_ns, &slope, &predicted)) {
    // No line yet: the last point before, along this instant's drift.
    auto before = points.lower_bound(t_ns);
    if (before == points.begin()) return false;
    --before;
    predicted = before->second + n.drift * static_cast<double>(t_ns - before->first);
  }
  return std::abs(n.offset_ns - predicted) > std::max(options_.jump_sigmas * n.uncertainty_ns, options_.jump_floor_ns);
}

bool PageDriftHistory::Line(const Points& points, int64_t t_ns, double* slope, double* at_t_ns) const {
  const auto from = points.lower_bound(t_ns - options_.span_ns);
  const auto to = points.lower_bound(t_ns);  // before t_ns
  const size_t count = static_cast<size_t>(std::distance(from, to));
  if (count < std::max<size_t>(options_.min_points, 2)) return false;
  const int64_t first = from->first;
  const int64_t last = std::prev(to)->first;
  if (last - first < options_.span_ns / 4) return false;
  // Ordinary least squares about the first point (seconds, ns), unweighted:
  // an instant whose sigma came out too small would steer a weighted line.
  const double y0 = from->second;
  double sx = 0, sy = 0;
  for (auto it = from; it != to; ++it) {
    sx += static_cast<double>(it->first - first) * 1e-9;
    sy += it->second - y0;
  }
  const double mx = sx / static_cast<double>(count), my = sy / static_cast<double>(count);
  double sxx = 0, sxy = 0;
  for (auto it = from; it != to; ++it) {
    const double dx = static_cast<double>(it->first - first) * 1e-9 - mx;
    sxx += dx * dx;
    sxy += dx * (it->second - y0 - my);
  }
  const double ns_per_s = sxy / sxx;
  *slope = ns_per_s * 1e-9;
  *at_t_ns = y0 + my + ns_per_s * (static_cast<double>(t_ns - first) * 1e-9 - mx);
  return true;
}

void PageDriftHistory::Forget(int64_t before_ns) {
  for (auto it = by_node_.begin(); it != by_node_.end();) {
    Points& points = it->second;
    points.erase(points.begin(), points.lower_bound(before_ns));
    it = points.empty() ? by_node_.erase(it) : std::next(it);
  }
  for (auto it = steps_.begin(); it != steps_.end();) {
    auto& steps = it->second;
    std::erase_if(steps, [&](const auto& step) { return step.second < before_ns; });
    it = steps.empty() ? steps_.erase(it) : std::next(it);
  }
}

}  // namespace chronolink
