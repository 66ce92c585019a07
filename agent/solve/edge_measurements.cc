#include "agent/solve/edge_measurements.h"

#include <algorithm>
#include <cmath>

namespace chronolink {

// A sort of the candidates, not a map: at 60 000 estimates the map's
// allocations were a tenth of a solve.
std::vector<const EdgeEstimate*> ChooseEstimates(std::span<const EdgeEstimate> edges, int64_t T,
                                                 const SolverOptions& opt) {
  struct Candidate {
    uint32_t node, peer;
    int64_t dt;
    const EdgeEstimate* e;
  };
  std::vector<Candidate> c;
  c.reserve(edges.size());
  for (const auto& e : edges) {
    if (e.node == e.peer) continue;
    if (!std::isfinite(e.beta_ns) || !std::isfinite(e.alpha) || !std::isfinite(e.uncertainty_ns) ||
        e.uncertainty_ns < 0)
      continue;
    // |T − x0| in int64 (saturating against absurd inputs) before any double.
    const int64_t dt = (T >= e.x0_ns) ? (T - e.x0_ns) : (e.x0_ns - T);
    if (dt < 0 || dt > opt.validity_horizon_ns) continue;
    c.push_back({e.node, e.peer, dt, &e});
  }
  std::stable_sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    if (a.node != b.node) return a.node < b.node;
    if (a.peer != b.peer) return a.peer < b.peer;
    if (a.dt != b.dt) return a.dt < b.dt;
    return a.e->uncertainty_ns < b.e->uncertainty_ns;
  });
  std::vector<const EdgeEstimate*> out;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i == 0 || c[i].node != c[i - 1].node || c[i].peer != c[i - 1].peer) out.push_back(c[i].e);
  }
  return out;
}

std::vector<EdgeMeasurement> MeasurementsAt(std::span<const EdgeEstimate> edges, int64_t T,
                                            const SolverOptions& opt, const NodeIndex& index_of) {
  std::vector<EdgeMeasurement> out;
  const std::vector<const EdgeEstimate*> chosen = ChooseEstimates(edges, T, opt);
  out.reserve(chosen.size());
  for (const EdgeEstimate* e : chosen) {
    const int64_t dt = T - e->x0_ns;  // bounded by the horizon
    EdgeMeasurement m;
    m.from = index_of(e->node);
    m.to = index_of(e->peer);
    m.x0_ns = e->x0_ns;
    m.offset_ns = e->beta_ns + e->alpha * static_cast<double>(dt);
    m.drift = e->alpha;
    m.uncertainty_ns = std::max(e->uncertainty_ns, opt.min_uncertainty_ns) +
                       opt.extrapolation_ns_per_s * std::fabs(static_cast<double>(dt)) * 1e-9;
    // Extrapolation error is each direction's own (its own drift estimate).
    if (e->shared_ns && std::isfinite(*e->shared_ns)) m.shared_ns = std::clamp(*e->shared_ns, 0.0, m.uncertainty_ns);
    out.push_back(m);
  }
  return out;
}

}  // namespace chronolink
