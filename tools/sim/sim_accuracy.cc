#include "tools/sim/sim_accuracy.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "agent/solve/node_wander_meter.h"
#include "agent/solve/spanning_tree_solver.h"

namespace chronolink::sim {
namespace {

// The true instant at which the mean of `nodes`' clocks reads T: the fixed
// point of t = T − mean deviation(t).
int64_t MeanClockInstant(const ClusterSimulator& sim, int64_t T, const std::vector<uint32_t>& nodes, ClockView view,
                         double* mean_deviation) {
  int64_t t = T;
  for (int i = 0; i < 8; ++i) {
    double sum = 0;
    for (uint32_t n : nodes) sum += sim.clock(n).DeviationNs(view, t);
    *mean_deviation = sum / static_cast<double>(nodes.size());
    const int64_t next = T - std::llround(*mean_deviation);
    if (next == t) break;
    t = next;
  }
  return t;
}

double Percentile(const std::vector<double>& sorted, double p) {
  const auto i = static_cast<size_t>(p * static_cast<double>(sorted.size()));
  return sorted[std::min(i, sorted.size() - 1)];
}

}  // namespace

std::string_view SolverMethodName(SolverMethod m) {
  return m == SolverMethod::kGlobal ? "global" : "spanning-tree";
}

SolveResult RunSolver(SolverMethod m, std::span<const EdgeEstimate> edges, int64_t T,
                      const SolverOptions& options) {
  return m == SolverMethod::kGlobal ? Solve(edges, T, options) : SolveSpanningTree(edges, T, options);
}

std::vector<EdgeEstimate> UsableEstimates(const SimTraffic& traffic) {
  std::vector<EdgeEstimate> out;
  for (const SimWindow& w : traffic.windows)
    if (w.usable) out.push_back(w.estimate);
  std::stable_sort(out.begin(), out.end(),
                   [](const EdgeEstimate& a, const EdgeEstimate& b) { return a.x0_ns < b.x0_ns; });
  return out;
}

std::span<const EdgeEstimate> EstimatesNear(std::span<const EdgeEstimate> sorted, int64_t T,
                                            int64_t horizon) {
  const auto begin = std::lower_bound(sorted.begin(), sorted.end(), T - horizon,
                                      [](const EdgeEstimate& e, int64_t v) { return e.x0_ns < v; });
  const auto end = std::upper_bound(begin, sorted.end(), T + horizon,
                                    [](int64_t v, const EdgeEstimate& e) { return v < e.x0_ns; });
  return sorted.subspan(static_cast<size_t>(begin - sorted.begin()), static_cast<size_t>(end - begin));
}

std::vector<double> TrueOffsets(const ClusterSimulator& sim, int64_t T, std::optional<uint32_t> reference,
                                const std::vector<uint32_t>& nodes, ClockView view) {
  int64_t t = 0;
  double ref_deviation = 0;
  if (reference) {
    t = sim.clock(*reference).TrueInstant(view, T);
    ref_deviation = sim.clock(*reference).DeviationNs(view, t);
  } else if (!nodes.empty()) {
    t = MeanClockInstant(sim, T, nodes, view, &ref_deviation);
  }
  std::vector<double> out;
  out.reserve(nodes.size());
  for (uint32_t n : nodes) out.push_back(sim.clock(n).DeviationNs(view, t) - ref_deviation);
  return out;
}

ErrorStats Summarize(std::vector<double> abs_errors) {
  ErrorStats s;
  s.samples = abs_errors.size();
  if (abs_errors.empty()) return s;
  std::sort(abs_errors.begin(), abs_errors.end());
  s.p50_ns = Percentile(abs_errors, 0.50);
  s.p99_ns = Percentile(abs_errors, 0.99);
  s.max_ns = abs_errors.back();
  return s;
}

SigmaCoverage Coverage(const std::vector<std::pair<double, double>>& errors_and_sigmas) {
  SigmaCoverage c;
  std::vector<double> errors, sigmas;
  size_t within[3] = {0, 0, 0};
  for (const auto& [error, sigma] : errors_and_sigmas) {
    if (!(sigma > 0) || !std::isfinite(sigma) || !std::isfinite(error)) continue;
    const double e = std::fabs(error);
    for (int k = 0; k < 3; ++k) within[k] += e <= (k + 1) * sigma ? 1 : 0;
    errors.push_back(e);
    sigmas.push_back(sigma);
  }
  c.samples = errors.size();
  if (errors.empty()) return c;
  const double n = static_cast<double>(c.samples);
  c.cover_1s = static_cast<double>(within[0]) / n;
  c.cover_2s = static_cast<double>(within[1]) / n;
  c.cover_3s = static_cast<double>(within[2]) / n;
  std::sort(errors.begin(), errors.end());
  std::sort(sigmas.begin(), sigmas.end());
  c.median_abs_error_ns = Percentile(errors, 0.5);
  c.median_sigma_ns = Percentile(sigmas, 0.5);
  c.width_ratio = c.median_abs_error_ns > 0 ? c.median_sigma_ns / c.median_abs_error_ns : 0;
  return c;
}

std::vector<std::pair<double, double>> SolutionErrors(const ClusterSimulator& sim, const SolveResult& r) {
  std::vector<uint32_t> nodes;
  for (const NodeSolution& s : r.nodes)
    if (s.reachable) nodes.push_back(s.node);
  const std::vector<double> truth = TrueOffsets(sim, r.reference_instant_ns, r.reference_node, nodes);
  std::vector<std::pair<double, double>> err;
  err.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (r.reference_node && nodes[i] == *r.reference_node) continue;  // 0 by definition
    const NodeSolution* n = r.Find(nodes[i]);
    err.emplace_back(n->offset_ns - truth[i], n->uncertainty_ns);
  }
  return err;
}

std::vector<std::pair<double, double>> RealtimeSolutionErrors(const ClusterSimulator& sim, const SolveResult& r) {
  std::vector<const NodeSolution*> solved;
  for (const NodeSolution& s : r.nodes)
    if (s.reachable) solved.push_back(&s);
  if (solved.empty()) return {};
  const int64_t T = r.reference_instant_ns;
  std::vector<double> d(solved.size());
  double d_ref = 0;
  for (size_t i = 0; i < solved.size(); ++i) {
    const int64_t own_instant = T + std::llround(solved[i]->offset_ns);
    d[i] = sim.clock(solved[i]->node).RealtimeMinusFitNs(own_instant);
    d_ref += d[i] / static_cast<double>(solved.size());
  }
  if (r.reference_node) d_ref = sim.clock(*r.reference_node).RealtimeMinusFitNs(T);
  std::vector<uint32_t> nodes;
  for (const NodeSolution* s : solved) nodes.push_back(s->node);
  const std::vector<double> truth =
      TrueOffsets(sim, T + std::llround(d_ref), r.reference_node, nodes, ClockView::kRealtime);
  std::vector<std::pair<double, double>> err;
  for (size_t i = 0; i < solved.size(); ++i) {
    if (r.reference_node && nodes[i] == *r.reference_node) continue;  // 0 by definition
    const double mapped = solved[i]->offset_ns + d[i] - d_ref;
    err.emplace_back(mapped - truth[i], solved[i]->uncertainty_ns);
  }
  return err;
}

WindowSummary SummarizeWindows(const SimTraffic& traffic) {
  WindowSummary s;
  double pure = 0, tuples = 0;
  std::vector<double> edge_err;
  std::vector<std::pair<double, double>> edge_sigma;
  for (const SimWindow& w : traffic.windows) {
    ++s.windows;
    if (w.estimator == EstimatorKind::kMaxMargin) ++s.max_margin;
    if (w.estimator == EstimatorKind::kMaxMarginPure) ++s.max_margin_pure;
    if (w.estimator == EstimatorKind::kMinDelay) ++s.min_delay;
    if (w.estimator == EstimatorKind::kNone) ++s.none;
    pure += w.pure_forward + w.pure_reverse;
    tuples += 2.0 * w.tuples;
    if (w.usable) {
      edge_err.push_back(std::fabs(w.estimate.beta_ns - w.true_beta_ns));
      edge_sigma.emplace_back(w.estimate.beta_ns - w.true_beta_ns, w.estimate.uncertainty_ns);
    }
  }
  s.pure_fraction = tuples > 0 ? pure / tuples : 0;
  s.edge_error = Summarize(std::move(edge_err));
  s.edge_sigma = Coverage(edge_sigma);
  return s;
}

AccuracyReport Evaluate(const ClusterSimulator& sim, const SimTraffic& traffic, const SolverOptions& options,
                        const std::function<void(int, int)>& progress, bool node_wander) {
  AccuracyReport report;
  report.windows = SummarizeWindows(traffic);
  const std::vector<EdgeEstimate> sorted = UsableEstimates(traffic);
  const std::vector<int64_t> instants = sim.ReferenceInstants();
  const SimConfig& config = sim.config();
  const auto window_index = [&](int64_t t) { return (t - config.start_ns) / config.window_ns; };
  NodeWanderMeter wander(config.window_ns, config.FitSpan());
  size_t fed = 0;  // of sorted: by x0, so by window index but for the clocks' offsets (ms)
  SolverOptions global_options = options;
  report.instants = static_cast<int>(instants.size());
  std::vector<double> err[2], realtime_err;
  std::vector<std::pair<double, double>> err_sigma[2], realtime_err_sigma;
  SolverAccuracy* acc[2] = {&report.global, &report.tree};
  const SolverMethod methods[2] = {SolverMethod::kGlobal, SolverMethod::kSpanningTree};
  for (size_t k = 0; k < instants.size(); ++k) {
    const auto near = EstimatesNear(sorted, instants[k], options.validity_horizon_ns);
    if (node_wander) {  // what the leader holds when it solves the instant: up to the next window
      for (; fed < sorted.size() && window_index(sorted[fed].x0_ns) <= window_index(instants[k]) + 1; ++fed) {
        wander.Add(sorted[fed], window_index(sorted[fed].x0_ns));
      }
      global_options.node_shared_sigma_ns = wander.SharedSigmas();
    }
    for (int m = 0; m < 2; ++m) {
      const auto started = std::chrono::steady_clock::now();
      const SolveResult r =
          RunSolver(methods[m], near, instants[k], methods[m] == SolverMethod::kGlobal ? global_options : options);
      acc[m]->solve_ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
      int64_t reached = 0;
      for (const NodeSolution& s : r.nodes) reached += s.reachable ? 1 : 0;
      acc[m]->unreachable += static_cast<int64_t>(sim.config().nodes) - reached;
      for (const auto& [error, sigma] : SolutionErrors(sim, r)) {
        err[m].push_back(std::fabs(error));
        err_sigma[m].emplace_back(error, sigma);
      }
      if (methods[m] != SolverMethod::kGlobal) continue;
      for (const auto& [error, sigma] : RealtimeSolutionErrors(sim, r)) {
        realtime_err.push_back(std::fabs(error));
        realtime_err_sigma.emplace_back(error, sigma);
      }
    }
    if (progress) progress(static_cast<int>(k) + 1, report.instants);
  }
  for (int m = 0; m < 2; ++m) {
    acc[m]->error = Summarize(std::move(err[m]));
    acc[m]->sigma = Coverage(err_sigma[m]);
    acc[m]->solve_ms /= std::max<size_t>(1, instants.size());
  }
  report.global_realtime.error = Summarize(std::move(realtime_err));
  report.global_realtime.sigma = Coverage(realtime_err_sigma);
  report.global_realtime.unreachable = report.global.unreachable;
  report.p99_ratio =
      report.global.error.p99_ns > 0 ? report.tree.error.p99_ns / report.global.error.p99_ns : 0;
  return report;
}

}  // namespace chronolink::sim
