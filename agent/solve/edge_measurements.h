// What both solvers (global_solver.h, spanning_tree_solver.h) solve from:
// per directed edge, the one estimate chosen at the reference instant T,
// carried to T. One rule for choosing, one for carrying, so the two solvers
// can only differ in how they combine the same measurements.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "agent/solve/global_solver.h"
#include "agent/solve/node_index.h"

namespace chronolink {

struct EdgeMeasurement {
  int from = 0, to = 0;         // node indices: offset_ns ≈ x[to] − x[from]
  int64_t x0_ns = 0;            // the estimate's own instant (its prober's clock)
  double offset_ns = 0;         // the estimate carried to T on its drift
  double drift = 0;             // its drift, d(offset)/dt
  double uncertainty_ns = 0;    // its own, floored, grown by the extrapolation to T
  double shared_ns = -1;        // the part of uncertainty_ns the link's other direction shares; < 0 unknown
};

// Per directed edge, the valid estimate closest to T (ties: the smaller
// uncertainty, then the first given), in (node, peer) order. Invalid
// estimates (self-edges, non-finite numbers, negative uncertainty) and
// those farther than the validity horizon from T are left out.
std::vector<const EdgeEstimate*> ChooseEstimates(std::span<const EdgeEstimate> edges, int64_t T,
                                                 const SolverOptions& opt);

// The chosen estimates as measurements at T, their nodes by `index_of`.
std::vector<EdgeMeasurement> MeasurementsAt(std::span<const EdgeEstimate> edges, int64_t T,
                                            const SolverOptions& opt, const NodeIndex& index_of);

}  // namespace chronolink
