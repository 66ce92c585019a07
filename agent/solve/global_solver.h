// The network-effect global solve (docs/solver.md): from the per-edge window
// estimates of all nodes, one offset and drift per node against a reference
// clock at a reference instant, by weighted least squares on the graph
// Laplacian with robust re-weighting. Pure library: no I/O, no clocks.
//
// Sign conventions (the same as edges.jsonl, docs/formats.md):
//   EdgeEstimate.beta_ns  = peer clock − node clock at node instant x0_ns;
//   EdgeEstimate.alpha    = d(peer − node)/d(node);
//   NodeSolution.offset_ns = node clock − reference clock at the reference
//                            instant T;  drift = d(node − reference)/d(reference).
// So an edge (a → b) measures offset[b] − offset[a] = beta + alpha·(T − x0),
// and to convert a reading of node i's clock to reference time subtract
// offset_ns (plus drift·elapsed).
//
// Instants are int64 ns; only differences of instants (T − x0, at most the
// validity horizon) ever become doubles, never epoch nanoseconds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock/fit_point.h"

namespace chronolink {

// One window estimate of one directed edge, as an agent writes it to
// edges.jsonl. Both directions of a probed edge are normally present (a→b and
// b→a), with opposite signs; both are used.
struct EdgeEstimate {
  uint32_t node = 0;           // the prober: x0_ns is on this node's clock
  uint32_t peer = 0;           // the probed peer
  int64_t x0_ns = 0;           // reference instant of the fit, node clock
  double beta_ns = 0;          // peer − node at x0_ns
  double alpha = 0;            // d(peer − node)/d(node)
  double uncertainty_ns = 0;   // half-width at x0_ns (treated as one sigma)
  // The part of uncertainty_ns that the link's other direction shares (its
  // delay asymmetry and stamping bias; the window's own noise is not shared).
  // Unknown: direction_correlation stands in for it.
  std::optional<double> shared_ns;
};

enum class RobustLoss {
  kNone,    // plain weighted least squares
  kHuber,   // weight min(1, k/|r/u|): bounded influence
  kCauchy,  // weight 1/(1 + (r/(k·u))²): redescending, slowly (k ≈ 2.4)
  kTukey,   // biweight (1 − (r/(k·u))²)², 0 beyond k: rejects outliers (k ≈ 4.7)
};

struct SolverOptions {
  // The reference: a node id, or (nullopt) the mean of all nodes of the
  // largest connected component.
  std::optional<uint32_t> reference_node;

  // Robust re-weighting (iteratively re-weighted least squares). The
  // residual of a measurement is scaled by its (floored) uncertainty.
  // The redescending losses (Cauchy, Tukey) scale residuals by
  // max(1, 1.4826·MAD of r/u) so that they start from the least-squares
  // solution without being trapped by it (docs/solver.md); Huber is convex
  // and keeps the nominal scale.
  RobustLoss loss = RobustLoss::kTukey;
  double robust_threshold = 4.685;    // k, in units of the (scaled) uncertainty
  int robust_iterations = 30;         // at most; stops earlier when converged
  double robust_tolerance_ns = 0.1;   // converged when no offset moves more (≪ the 1 ns floor)

  // An estimate is used at reference instant T only if |T − x0| ≤ horizon.
  // Of several estimates of the same directed edge, the one with x0 closest
  // to T is used.
  int64_t validity_horizon_ns = 4'000'000'000;  // two 2 s windows
  // Uncertainty growth with extrapolation: u_eff = max(u, floor) +
  // extrapolation_ns_per_s · |T − x0| / 1 s.
  double extrapolation_ns_per_s = 0.0;
  double min_uncertainty_ns = 1.0;  // floor: no estimate is trusted beyond it

  // Per-node uncertainty: exact (diagonal of the inverse of the reduced
  // weighted Laplacian, dense) for components up to this many nodes; above
  // it, a stochastic estimate of the same diagonal (Hutchinson: the mean of
  // z ⊙ L⁺z over `uncertainty_probes` Rademacher vectors z, each L⁺z by
  // conjugate gradient, with the first terms of L⁺'s series as a control
  // variate; unbiased, ~1 ms per probe at 10 000 nodes, per-node sigma
  // within ~10 % (named reference) / ~25 % (mean) of exact at 16 probes on
  // the agent's probe graph, the median within 1 %), or with
  // uncertainty_probes = 0 the least-resistance-path variance from the
  // anchor: an upper bound for a named reference, loose (docs/solver.md).
  int exact_uncertainty_max_nodes = 500;
  int uncertainty_probes = 16;
  // Correlation, in [0, 1], of the errors of the two directions of one link
  // (a probes b, b probes a) at T. Both see the link's delay asymmetry with
  // the same sign, which the edge's sigma covers but which does not average
  // out between the two: 1 (the default) treats the shared part as the whole
  // sigma, so two directions of sigma u make one link of sigma u, not u/√2.
  // Only the uncertainty depends on it; the offsets weight every directed
  // measurement by 1/u² as before. Where every measurement of a link states
  // its shared_ns, those give the correlation instead (docs/solver.md).
  double direction_correlation = 1.0;
  // A bias of one node's own stamping path (its kernel's receive and send
  // paths, its CPU's load: the leader's is busier) is shared by every edge
  // of that node, so no averaging over its edges removes it, while the
  // per-node variance above treats the edges as independent but for each
  // link's shared part. Added in quadrature to each node's uncertainty: its
  // own, and a named reference's, which every other node's offset carries
  // (docs/solver.md). The edges' own floor (docs/estimator.md §8) is this
  // size too, and is the same bias seen on one link: in components of up to
  // 100 nodes, what the links' floors already carry into a node's offset is
  // not added again. 4 ns since 2026-12-06, with the edges' (5 before).
  double node_bias_floor_ns = 4.0;
  // Each node's σ of what its own clock's wander makes all its edges miss
  // alike (NodeWanderMeter: measured from the windows, docs/solver.md "A
  // node's own wander"). Shared by every edge of the node like the bias
  // above, and as unknowable from one instant's edges; the node's term is
  // the larger of the two (the floor stands for what no window shows).
  // A node absent: the floor alone.
  std::unordered_map<uint32_t, double> node_shared_sigma_ns;
  // Linear solver: sparse LDLᵀ up to this many nodes per component,
  // conjugate gradient (diagonal preconditioner) above.
  int direct_solver_max_nodes = 100;
  double cg_tolerance = 1e-13;
};

struct NodeSolution {
  uint32_t node = 0;
  bool reachable = false;     // connected to the reference at T
  double offset_ns = 0;       // node − reference at T (0 when !reachable)
  double drift = 0;           // d(node − reference)/d(reference) (0 when !reachable)
  double uncertainty_ns = 0;  // one-sigma of offset_ns (0 for a named reference)
  double residual_ns = 0;     // robust-weighted RMS residual of its edges at T
  int component = -1;         // 0: the reference's component; 1..: others
  int edges_used = 0;         // measurements at T touching this node
  // The node's REALTIME − F at its instant of T, by which the leader mapped
  // this solution from the fit clocks (none from the solver itself).
  std::optional<FitDiscipline> discipline = std::nullopt;
  // The drift the node's clock page extrapolates with, as `drift`: a line
  // through its last span of solved offsets on the fit clocks, mapped as
  // drift is (agent/cluster/page_drift_history.h; the leader's, none from the
  // solver itself, and not in offsets.jsonl).
  std::optional<double> page_drift = std::nullopt;
};

// One measurement used at T, with its fate.
struct EdgeResidual {
  uint32_t node = 0, peer = 0;
  int64_t x0_ns = 0;
  double measured_ns = 0;     // beta + alpha·(T − x0)
  double residual_ns = 0;     // measured − (offset[peer] − offset[node])
  double uncertainty_ns = 0;  // effective (floored, extrapolated)
  double robust_weight = 1;   // final IRLS factor in (0, 1]
  bool in_reference_component = false;
};

struct SolveResult {
  int64_t reference_instant_ns = 0;
  std::optional<uint32_t> reference_node;  // as asked; nullopt: mean
  std::vector<NodeSolution> nodes;         // every node seen, by id
  std::vector<EdgeResidual> edges;         // measurements valid at T
  int components = 0;                      // connected components at T
  int robust_iterations = 0;               // IRLS passes run on offsets
  bool converged = true;                   // IRLS and the linear solver
  bool exact_uncertainty = true;           // false: stochastic or path-bound estimate

  const NodeSolution* Find(uint32_t node) const;
};

// Solves offsets and drifts of every node at reference instant T (on the
// reference clock). Each estimate is evaluated as beta + alpha·(x − x0) at
// the instant x of its prober's clock that corresponds to T: x0 is on the
// prober's clock, and ignoring the difference would cost alpha × the
// prober's offset (45 ppm × 3.7 ms = 166 ns). So the solve runs twice: the
// first pass gives every prober's offset, the second evaluates at T + it.
//
// Nodes not connected (through edges valid at T) to the named reference, or
// outside the largest component with the mean reference, are reported
// reachable=false with no offset. A named reference that has no edges at T
// is itself reachable (offset 0) and every other node unreachable.
//
// `previous`, optional: a solution of a nearby instant (the last window's).
// The iterative solver starts from it, which makes a solve cheaper; the
// result does not depend on it beyond the solver's tolerance.
SolveResult Solve(std::span<const EdgeEstimate> edges, int64_t reference_instant_ns,
                  const SolverOptions& options = {}, const SolveResult* previous = nullptr);

}  // namespace chronolink
