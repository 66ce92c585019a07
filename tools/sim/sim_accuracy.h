// Scoring a simulated run (docs/simulator.md): the agents' estimates are
// solved at every reference instant by the global solve and by the
// spanning-tree baseline, and each solution is compared with the simulated
// truth: node clock − reference clock at the instant the reference clock
// reads T (NodeSolution's sign convention), the reference being a named
// node or the mean of the nodes the solver reached.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "agent/solve/global_solver.h"
#include "tools/sim/cluster_simulator.h"

namespace chronolink::sim {

enum class SolverMethod { kGlobal, kSpanningTree };
std::string_view SolverMethodName(SolverMethod m);

SolveResult RunSolver(SolverMethod m, std::span<const EdgeEstimate> edges, int64_t T,
                      const SolverOptions& options);

// The usable estimates of a run, sorted by x0.
std::vector<EdgeEstimate> UsableEstimates(const SimTraffic& traffic);

// The estimates within `horizon` of T (of `sorted`, sorted by x0).
std::span<const EdgeEstimate> EstimatesNear(std::span<const EdgeEstimate> sorted, int64_t T, int64_t horizon);

// True node − reference at the instant the reference reads T, for each of
// `nodes`: against the named node, or (nullopt) the mean of `nodes`; on the
// clocks the agents fit on, or on REALTIME.
std::vector<double> TrueOffsets(const ClusterSimulator& sim, int64_t T, std::optional<uint32_t> reference,
                                const std::vector<uint32_t>& nodes, ClockView view = ClockView::kFit);

struct ErrorStats {
  size_t samples = 0;
  double p50_ns = 0, p99_ns = 0, max_ns = 0;
};
ErrorStats Summarize(std::vector<double> abs_errors);

// solved − true, with the solved one-sigma, of every reachable node of `r`
// but a named reference.
std::vector<std::pair<double, double>> SolutionErrors(const ClusterSimulator& sim, const SolveResult& r);

// The same after mapping `r` (on the fit clocks) back to REALTIME as the
// leader maps it (docs/leader.md "From fit clocks to REALTIME"):
//   REALTIME_n − REALTIME_ref = (F_n − F_ref) + d_n − d_ref,  d = REALTIME − F,
// each d at the node's own instant of T, d_ref the mean d for the mean
// reference; against REALTIME's truth at the instant the reference's
// REALTIME reads T + d_ref.
std::vector<std::pair<double, double>> RealtimeSolutionErrors(const ClusterSimulator& sim, const SolveResult& r);

// How honest a reported one-sigma is against the truth: the share of
// |error| within 1, 2 and 3 sigma, and the median sigma over the median
// |error| (issue 12's targets: 3-sigma coverage >= 0.99, ratio <= 3).
struct SigmaCoverage {
  size_t samples = 0;
  double cover_1s = 0, cover_2s = 0, cover_3s = 0;
  double median_sigma_ns = 0, median_abs_error_ns = 0, width_ratio = 0;
};
// From (error, sigma) pairs; pairs without a positive sigma are left out.
SigmaCoverage Coverage(const std::vector<std::pair<double, double>>& errors_and_sigmas);

struct SolverAccuracy {
  ErrorStats error;         // over all nodes and instants
  SigmaCoverage sigma;      // the solved one-sigma against the same errors
  double solve_ms = 0;      // mean wall time of one solve (one instant)
  int64_t unreachable = 0;  // node-instants without an offset (no estimate, or another component)
};

struct WindowSummary {
  size_t windows = 0, max_margin = 0, max_margin_pure = 0, min_delay = 0, none = 0;
  double pure_fraction = 0;  // pure pairs (both directions) per complete tuple and direction
  ErrorStats edge_error;     // |beta − true| of the usable windows
  SigmaCoverage edge_sigma;  // the one-sigma the solve weights them by, against that error
};
WindowSummary SummarizeWindows(const SimTraffic& traffic);

struct AccuracyReport {
  int instants = 0;
  WindowSummary windows;
  SolverAccuracy global, tree;
  SolverAccuracy global_realtime;  // the global solve mapped back to REALTIME (its error and sigma)
  double p99_ratio = 0;  // spanning tree / global: > 1 is the network effect
};

// Solves at every reference instant with both methods. `options` gives the
// reference and the loss; its validity horizon is the caller's (two windows
// match chronolink-solve). As the leader, the global solve takes each
// node's wander from the windows up to the one after the instant
// (NodeWanderMeter), unless `node_wander` is false (the solve before
// 2026-12-05). `progress(done, total)` after each instant.
AccuracyReport Evaluate(const ClusterSimulator& sim, const SimTraffic& traffic, const SolverOptions& options,
                        const std::function<void(int, int)>& progress = {}, bool node_wander = true);

}  // namespace chronolink::sim
