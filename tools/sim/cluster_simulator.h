// chronolink-sim's cluster (docs/simulator.md): N nodes with drifting and
// wandering oscillators, each disciplined by a daemon (or not), the probe graph every node derives (ProbeGraph::Build),
// and links with fixed delays, asymmetry and queueing. Every directed edge's
// probe traffic is simulated on its own (its own random stream), stamped on
// the two nodes' clocks into the records the agent builds (FullTuple of
// ProbeStamps: kernel source class, node and peer clock domains) and run
// through the agent's own code: TupleAssembler, EdgeWindows (the coded-pair
// purity filter, then the max-margin fit or the min-delay fallback). What
// comes out is what the agents would export, plus the simulated truth.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/cluster/probe_graph.h"
#include "agent/estimate/edge_drift_history.h"
#include "agent/estimate/fit_span_range.h"
#include "agent/estimate/window_estimator.h"
#include "agent/estimate/window_scatter.h"
#include "agent/solve/global_solver.h"
#include "tools/sim/sim_link.h"
#include "tools/sim/sim_node_clock.h"

namespace chronolink::sim {

struct SimConfig {
  uint32_t nodes = 100;  // ids 0..nodes-1
  int k = 6;             // ProbeGraphOptions::k
  int windows = 5;       // estimation windows simulated (and reference instants solved)
  int64_t window_ns = 2'000'000'000;
  // The agent's defaults: each window's fit takes the probes of a span
  // centred on it, chosen per edge from two windows up to fit_span_max_ns
  // (fit_span_ns 0; else that span, fixed), a pair every 50 ms (where its
  // adaptive cadence settles on a quiet path), both probes back to back (on
  // veth they leave the kernel 1-3 µs apart).
  int64_t fit_span_ns = 0;
  int64_t fit_span_max_ns = 0;  // 0: three windows, as the agent's --fit-span-max-s
  // 0: ten windows, as the agent's --fit-span-trailing-max-s
  int64_t fit_span_trailing_max_ns = 0;
  // 0: the chooser's start span (FitSpanChooser::StartSpan), as the agent's
  int64_t fit_span_start_ns = 0;
  bool fit_later_half = true;  // as the agent's --fit-later-half
  // The window sigma's options (docs/estimator.md §8: its later half's
  // factor, memory and trend's stretch among them): the agent's, unless an
  // experiment asks for others. Its path_asymmetry_ns is asymmetry_ns's.
  WindowScatterOptions sigma;
  FitSpanRange FitSpans() const {
    FitSpanRange r = FitSpanRange::Of(window_ns, fit_span_ns, fit_span_max_ns, fit_span_trailing_max_ns);
    r.start_ns = r.chosen ? fit_span_start_ns : 0;
    r.later_half = r.chosen && fit_later_half;
    return r;
  }
  bool AdaptiveFitSpan() const { return FitSpans().chosen; }
  // The longest centred span a fit takes (it sets the lag), the longest of
  // all, and the shortest.
  int64_t FitSpan() const { return FitSpans().longest_ns; }
  int64_t MaxFitSpan() const { return FitSpans().longest_trailing_ns; }
  // Where a chosen span starts.
  int64_t StartFitSpan() const;
  int64_t MinFitSpan() const { return FitSpans().shortest_ns; }
  int64_t interval_ns = 50'000'000;  // one coded pair per directed edge per interval
  double interval_jitter = 0.2;      // ± uniform fraction of the interval
  int64_t spacing_ns = 2'000;        // between the two probes of a pair
  uint64_t seed = 1;

  double offset_spread_ns = 50e6;   // clock offsets uniform in ±spread
  double drift_spread = 100e-6;     // drifts uniform in ±spread
  double wander_ns_per_sqrt_s = 5;  // random-walk phase noise
  // Random-walk FM (sigma_y at 1 s): the test bed's crystal (node_clocks.py).
  double frequency_wander_adev_1s = 2e-11;
  DisciplineParams discipline;      // each node's daemon, and the clock the agent fits on
  double delay_min_ns = 20'000;     // per-link base one-way delay, uniform in [min, max]
  double delay_max_ns = 200'000;
  double asymmetry_ns = 500;  // per-link asymmetry (fwd − rev) uniform in ±this
  QueueParams queue;
  // Per-link asymmetry replacing the drawn one, keyed (lower id, higher id);
  // positive: the lower id's packets take longer.
  std::map<std::pair<uint32_t, uint32_t>, double> asymmetry_override;

  WindowEstimatorOptions estimator;  // the agent's defaults
  EdgeDriftHistoryOptions drift_history;  // the agent's defaults (--fit-drift-windows)
  int threads = 1;
  // First window's start on every node's clock; a multiple of window_ns.
  int64_t start_ns = 1'790'000'000'000'000'000;
};

// An empty string, or what is wrong with the configuration.
std::string ValidateConfig(const SimConfig& config);

// One closed window of one directed edge.
struct SimWindow {
  EdgeEstimate estimate;  // node = prober, x0 on its clock
  EstimatorKind estimator = EstimatorKind::kNone;
  bool usable = false;  // what the agent would hand the solver (an estimate, fit ok, no clock step)
  int64_t pairs_sent = 0;
  int tuples = 0;  // complete tuples offered to the estimator
  int pure_forward = 0;
  int pure_reverse = 0;
  double true_beta_ns = 0;  // true peer − node at x0
  int64_t fit_span_ns = 0;  // the probes the fit took (fit_end - fit_start)
};

struct SimTraffic {
  std::vector<SimWindow> windows;  // by (node, peer), then window
  size_t directed_edges = 0;
  double wall_s = 0;
};

class ClusterSimulator {
 public:
  // The configuration must be valid (ValidateConfig).
  explicit ClusterSimulator(SimConfig config);

  const SimConfig& config() const { return config_; }
  const ProbeGraph& graph() const { return graph_; }
  const SimNodeClock& clock(uint32_t node) const { return clocks_[node]; }
  const SimLink& link(uint32_t a, uint32_t b) const;

  // The probe traffic of one directed edge, through the agent's pairing and
  // estimator; deterministic for (seed, node, peer).
  std::vector<SimWindow> SimulateEdge(uint32_t node, uint32_t peer) const;

  // Every directed edge, on config().threads threads. `progress(done, total)`
  // is called from the calling thread now and then.
  SimTraffic SimulateAll(const std::function<void(size_t, size_t)>& progress = {}) const;

  // The reference instants: the windows' midpoints (reference clock).
  std::vector<int64_t> ReferenceInstants() const;

 private:
  SimConfig config_;
  ProbeGraph graph_;
  std::vector<SimNodeClock> clocks_;  // by node id
  std::vector<SimLink> links_;    // parallel to graph_.edges()
};

}  // namespace chronolink::sim
