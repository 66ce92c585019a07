// What the leader solves from one closed window of an edge: its estimate
// at x0 with the σ the solve weights it by, or nothing when the window has
// no estimate (no fit, a failed one, or a clock step inside it). One rule
// for the agent (runtime/cluster_service.cc) and the simulator
// (tools/sim), so the simulator solves exactly what agents publish.
#pragma once

#include <optional>

#include "agent/estimate/edge_windows.h"
#include "agent/solve/global_solver.h"

namespace chronolink {

inline std::optional<EdgeEstimate> EdgeEstimateOf(const EdgeWindowRecord& r) {
  if (r.clock_step || r.estimate.estimator == EstimatorKind::kNone || !r.estimate.fit.ok) return std::nullopt;
  EdgeEstimate e;
  e.node = r.node;
  e.peer = r.peer;
  e.x0_ns = r.x0_ns;
  e.beta_ns = r.estimate.fit.beta_ns;
  e.alpha = r.estimate.fit.alpha;
  e.uncertainty_ns = r.SolveSigma();
  e.shared_ns = r.SolveShared();
  return e;
}

}  // namespace chronolink
