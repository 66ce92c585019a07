#include "agent/solve/prober_instants.h"

#include <algorithm>
#include <cmath>

#include "agent/solve/node_index.h"

namespace chronolink {
namespace {

constexpr int kMaxProberPasses = 4;
constexpr double kEvaluationToleranceNs = 0.1;

double LargestAlpha(std::span<const EdgeEstimate> edges) {
  double a = 0;
  for (const EdgeEstimate& e : edges) {
    if (std::isfinite(e.alpha)) a = std::max(a, std::fabs(e.alpha));
  }
  return a;
}

double OffsetSpread(const SolveResult& r) {
  double lo = 0, hi = 0;
  for (const NodeSolution& n : r.nodes) {
    if (!n.reachable || !std::isfinite(n.offset_ns)) continue;
    lo = std::min(lo, n.offset_ns);
    hi = std::max(hi, n.offset_ns);
  }
  return hi - lo;  // between any two nodes, whatever the reference
}

}  // namespace

std::vector<EdgeEstimate> ShiftedToProbers(std::span<const EdgeEstimate> edges, const SolveResult& probers) {
  const NodeIndex index_of = NodeIndex::Of(probers);
  std::vector<EdgeEstimate> shifted(edges.begin(), edges.end());
  for (EdgeEstimate& e : shifted) {
    const int i = index_of(e.node);
    const NodeSolution* n = i >= 0 ? &probers.nodes[i] : nullptr;
    if (n != nullptr && n->reachable && std::isfinite(n->offset_ns)) e.x0_ns -= std::llround(n->offset_ns);
  }
  return shifted;
}

int ProberPasses(std::span<const EdgeEstimate> edges, const SolveResult& first) {
  const double alpha = LargestAlpha(edges);
  double left = alpha * alpha * OffsetSpread(first);
  int passes = 1;
  for (; passes < kMaxProberPasses && left > kEvaluationToleranceNs; ++passes) left *= alpha;
  return passes;
}

}  // namespace chronolink
