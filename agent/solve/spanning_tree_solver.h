// Baseline for the network effect (docs/simulator.md): offsets from a
// spanning tree only, the way a chain of pairwise syncs would get them. The
// global solve (global_solver.h) averages the redundant measurements of
// every loop; this solver ignores all but the tree's, so comparing the two
// on the same data measures what the loops buy.
//
// Same inputs, outputs and sign conventions as chronolink::Solve:
//   * per directed edge, the valid estimate whose x0 is closest to T, each
//     evaluated at the prober's instant that corresponds to T (two passes);
//   * the two directions of an edge are combined into one link value, their
//     inverse-variance mean (uncertainty_ns as one sigma, floored);
//   * the tree is the shortest-path tree from the anchor by link variance
//     (Dijkstra), i.e. every node's least-variance chain to the anchor;
//   * offsets and drifts are summed along the tree; the anchor is the named
//     reference, or for the mean reference the lowest id of the largest
//     component, after which the component's mean is subtracted;
//   * nodes outside the reference's component are reported unreachable.
//
// Outputs specific to the baseline: uncertainty_ns is the exact one-sigma
// of the tree estimate (the variance summed along the path; against the
// mean, through the subtree sizes), so exact_uncertainty is always true.
// A link's two directions count in it as correlated the way Solve counts
// them (their shared_ns where both state it, else direction_correlation);
// the tree itself is chosen by the links' variance with the directions
// independent, so the choice rests on each link's own precision;
// residual_ns is the 1/u²-weighted RMS residual of all the node's
// measurements; an EdgeResidual's robust_weight is 1 when its link is a
// tree edge and 0 when the tree ignored it. No robust re-weighting is done:
// robust_iterations is 0 and the loss options are ignored.
#pragma once

#include <cstdint>
#include <span>

#include "agent/solve/global_solver.h"

namespace chronolink {

SolveResult SolveSpanningTree(std::span<const EdgeEstimate> edges, int64_t reference_instant_ns,
                              const SolverOptions& options = {});

}  // namespace chronolink
