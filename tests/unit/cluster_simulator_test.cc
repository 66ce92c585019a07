// Tests of the cluster simulator (tools/sim/, docs/simulator.md): a small
// cluster without asymmetry solves close to the simulated truth, one
// asymmetric link shows up where it should, a run is a function of its
// seed alone, and a daemon bending REALTIME stays out of the estimates made
// on the fit clocks, and out of the solution mapped back to REALTIME.
#include "tools/sim/cluster_simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "tools/sim/sim_accuracy.h"

namespace chronolink::sim {
namespace {

SimConfig SmallCluster() {
  SimConfig c;
  c.nodes = 8;
  c.windows = 3;
  c.asymmetry_ns = 0;
  c.threads = 2;
  return c;
}

SolverOptions NamedReference(uint32_t node, const SimConfig& c) {
  SolverOptions o;
  o.reference_node = node;
  o.validity_horizon_ns = 2 * c.window_ns;
  return o;
}

bool OnLink(uint32_t a, uint32_t b, const ProbeEdge& link) {
  return std::min(a, b) == link.first && std::max(a, b) == link.second;
}

TEST(ClusterSimulator, DefaultsAreValidAndBadConfigsAreNot) {
  EXPECT_EQ(ValidateConfig(SimConfig{}), "");
  SimConfig c;
  c.nodes = 1;
  EXPECT_NE(ValidateConfig(c), "");
  c = SimConfig{};
  c.delay_min_ns = 300'000;  // above the max
  EXPECT_NE(ValidateConfig(c), "");
  c = SimConfig{};
  c.queue.idle_fraction = 1.5;
  EXPECT_NE(ValidateConfig(c), "");
  c = SimConfig{};
  c.start_ns += 1;  // windows would not line up
  EXPECT_NE(ValidateConfig(c), "");
  // The longest chosen span follows the window (three of them) unless given.
  c = SimConfig{};
  c.window_ns = 1'000'000'000;
  c.start_ns = 1'790'000'000'000'000'000;
  EXPECT_EQ(ValidateConfig(c), "");
  EXPECT_EQ(c.FitSpan(), 3'000'000'000);
  EXPECT_EQ(c.MinFitSpan(), 2'000'000'000);
  EXPECT_EQ(c.MaxFitSpan(), 10'000'000'000) << "reaching back seven windows more, as the agent's";
  c.fit_span_trailing_max_ns = 2'500'000'000;  // under the longest centred span
  EXPECT_NE(ValidateConfig(c), "");
  c.fit_span_trailing_max_ns = 3'000'000'000;
  EXPECT_EQ(ValidateConfig(c), "");
  // Before any evidence the agent's start span: the longest, 3 s of 2-3 s.
  EXPECT_EQ(c.StartFitSpan(), 3'000'000'000);
  c.fit_span_start_ns = 2'000'000'000;
  EXPECT_EQ(ValidateConfig(c), "");
  EXPECT_EQ(c.StartFitSpan(), 2'000'000'000);
  for (int64_t bad : {1'000'000'000LL, 4'000'000'000LL, 2'500'000'000LL}) {  // under, over, not whole windows
    c.fit_span_start_ns = bad;
    EXPECT_NE(ValidateConfig(c), "") << bad;
  }
  c.fit_span_start_ns = 2'000'000'000;
  c.fit_span_ns = 2'000'000'000;  // a fixed span has no start
  EXPECT_NE(ValidateConfig(c), "");
  c.fit_span_ns = 0;
  c.fit_span_start_ns = 0;
  c.fit_span_max_ns = 1'500'000'000;  // under two windows
  EXPECT_NE(ValidateConfig(c), "");
}

TEST(ClusterSimulator, ClockReadsAndInvertsOnIntegerNanoseconds) {
  const ClusterSimulator sim(SmallCluster());
  const SimNodeClock& clk = sim.clock(3);
  const int64_t t = sim.config().start_ns + 1'234'567'891;
  const int64_t local = clk.Read(t);
  EXPECT_NEAR(static_cast<double>(local - t), clk.DeviationNs(t), 0.5);
  EXPECT_LE(std::llabs(clk.TrueInstant(local) - t), 1);
  EXPECT_LE(std::fabs(clk.DeviationNs(t)), 50e6 + 100e-6 * 10e9 + 1e3);
}

TEST(ClusterSimulator, SmallClusterWithoutAsymmetrySolvesWithinAMicrosecond) {
  const ClusterSimulator sim(SmallCluster());
  const SimTraffic traffic = sim.SimulateAll();
  // Every directed edge of the graph closes 3 windows, all with a fit.
  EXPECT_EQ(traffic.directed_edges, 2 * sim.graph().edges().size());
  ASSERT_EQ(traffic.windows.size(), 3 * traffic.directed_edges);
  // One pair per interval, ± its jitter: about window / interval a window.
  const double pairs = static_cast<double>(sim.config().window_ns) / static_cast<double>(sim.config().interval_ns);
  for (const SimWindow& w : traffic.windows) {
    EXPECT_TRUE(w.usable);
    EXPECT_EQ(w.estimator, EstimatorKind::kMaxMargin);  // enough pure pairs at the default rate
    EXPECT_GT(w.pairs_sent, 0.75 * pairs);
    EXPECT_LT(std::fabs(w.estimate.beta_ns - w.true_beta_ns), 1000.0);
    EXPECT_GT(w.pure_forward, 0);
    EXPECT_LT(w.pure_forward, w.tuples);  // queueing spoils most pairs
  }
  for (const SolverOptions& o : {NamedReference(2, sim.config()), SolverOptions{}}) {
    const AccuracyReport r = Evaluate(sim, traffic, o);
    EXPECT_EQ(r.instants, 3);
    EXPECT_EQ(r.global.unreachable, 0);
    EXPECT_EQ(r.tree.unreachable, 0);
    EXPECT_LT(r.global.error.max_ns, 1000.0);
    EXPECT_LT(r.tree.error.max_ns, 1000.0);
    EXPECT_EQ(r.global.error.samples, o.reference_node ? 3u * 7 : 3u * 8);
  }
}

// Link {lo, hi} delays lo's packets by `asym` more than hi's: every
// estimate of that link is off by asym/2 (lo's probes see θ + asym/2, hi's
// θ − asym/2 of their own direction), the only error the data cannot show
// on the link itself. The loops expose it: the solve leaves its largest
// residuals on that link, and no node is off by more than the bias.
TEST(ClusterSimulator, AsymmetryOnOneLinkIsAttributable) {
  SimConfig c = SmallCluster();
  c.nodes = 16;
  c.k = 4;
  c.delay_min_ns = 50'000;
  c.delay_max_ns = 60'000;
  const ClusterSimulator probe_graph_only(c);
  const ProbeEdge bad = probe_graph_only.graph().edges()[5];
  const double asym = 40'000;
  c.asymmetry_override[bad] = asym;
  const ClusterSimulator sim(c);
  const SimTraffic traffic = sim.SimulateAll();

  for (const SimWindow& w : traffic.windows) {
    ASSERT_TRUE(w.usable);
    const double err = w.estimate.beta_ns - w.true_beta_ns;
    if (!OnLink(w.estimate.node, w.estimate.peer, bad)) {
      EXPECT_LT(std::fabs(err), 100.0) << w.estimate.node << "->" << w.estimate.peer;
    } else {
      const double expected = w.estimate.node == bad.first ? asym / 2 : -asym / 2;
      EXPECT_NEAR(err, expected, 0.1 * asym / 2) << w.estimate.node << "->" << w.estimate.peer;
    }
  }

  const std::vector<EdgeEstimate> sorted = UsableEstimates(traffic);
  const SolverOptions o = NamedReference(bad.first, c);
  for (int64_t T : sim.ReferenceInstants()) {
    const SolveResult r = Solve(EstimatesNear(sorted, T, o.validity_horizon_ns), T, o);
    // The two largest |residuals| are the bad link's two directions.
    std::vector<EdgeResidual> edges = r.edges;
    std::sort(edges.begin(), edges.end(), [](const EdgeResidual& a, const EdgeResidual& b) {
      return std::fabs(a.residual_ns) > std::fabs(b.residual_ns);
    });
    ASSERT_GE(edges.size(), 3u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(OnLink(edges[i].node, edges[i].peer, bad))
          << i << ": " << edges[i].node << "->" << edges[i].peer;
    }
    EXPECT_GT(std::fabs(edges[1].residual_ns), 2 * std::fabs(edges[2].residual_ns));
    double worst = 0;
    for (const auto& [error, sigma] : SolutionErrors(sim, r)) worst = std::max(worst, std::fabs(error));
    EXPECT_LT(worst, asym / 2);
  }
}

TEST(ClusterSimulator, DeterministicForASeedWhateverTheThreads) {
  SimConfig c = SmallCluster();
  c.asymmetry_ns = 500;
  c.queue.loss_fraction = 0.01;  // the lost-packet paths too
  c.threads = 1;
  const SimTraffic a = ClusterSimulator(c).SimulateAll();
  c.threads = 3;
  const SimTraffic b = ClusterSimulator(c).SimulateAll();
  c.seed = 2;
  const SimTraffic other = ClusterSimulator(c).SimulateAll();
  ASSERT_EQ(a.windows.size(), b.windows.size());
  bool differs = false;
  for (size_t i = 0; i < a.windows.size(); ++i) {
    const EdgeEstimate &x = a.windows[i].estimate, &y = b.windows[i].estimate;
    EXPECT_EQ(x.node, y.node);
    EXPECT_EQ(x.peer, y.peer);
    EXPECT_EQ(x.x0_ns, y.x0_ns);
    EXPECT_EQ(x.beta_ns, y.beta_ns);
    EXPECT_EQ(x.alpha, y.alpha);
    EXPECT_EQ(x.uncertainty_ns, y.uncertainty_ns);
    EXPECT_EQ(a.windows[i].pure_forward, b.windows[i].pure_forward);
    if (i < other.windows.size() && other.windows[i].estimate.beta_ns != x.beta_ns) differs = true;
  }
  EXPECT_TRUE(differs) << "another seed must give another run";
}

// Two runs of one small wandering cluster, the second with `change`
// applied: each window's estimate in both, window by window, to show that a
// sigma setting reaches the sigma and nothing else (the same lines).
struct SigmaOnlyComparison {
  int narrower = 0, wider = 0;
};
SigmaOnlyComparison CompareSigmaOnly(const std::function<void(SimConfig&)>& first,
                                     const std::function<void(SimConfig&)>& second) {
  SimConfig c = SmallCluster();
  c.nodes = 6;
  c.windows = 40;
  c.wander_ns_per_sqrt_s = 20;
  first(c);
  const SimTraffic a = ClusterSimulator(c).SimulateAll();
  second(c);
  const SimTraffic b = ClusterSimulator(c).SimulateAll();
  SigmaOnlyComparison out;
  EXPECT_EQ(a.windows.size(), b.windows.size());
  for (size_t i = 0; i < std::min(a.windows.size(), b.windows.size()); ++i) {
    const EdgeEstimate &x = a.windows[i].estimate, &y = b.windows[i].estimate;
    EXPECT_EQ(x.beta_ns, y.beta_ns) << i;
    out.narrower += y.uncertainty_ns < x.uncertainty_ns;
    out.wider += y.uncertainty_ns > x.uncertainty_ns;
  }
  return out;
}

// The later half's sigma factor (--later-half-sigma-factor) reaches the
// windows' sigma and nothing else: the same run at factor 1 and at the
// agent's 0.5 has the same lines, and a narrower sigma only in the windows
// averaged with their later half (which a run of 40 windows, whose chooser
// judges from the 16th, has).
TEST(ClusterSimulator, TheLaterHalfSigmaFactorNarrowsOnlyTheSigma) {
  const SigmaOnlyComparison r = CompareSigmaOnly([](SimConfig& c) { c.sigma.later_half_factor = 1.0; },
                                                 [](SimConfig& c) { c.sigma.later_half_factor = 0.5; });
  EXPECT_EQ(r.wider, 0) << "the factor only narrows";
  EXPECT_GT(r.narrower, 0) << "no window was averaged with its later half";
}

// The sigma memory (--sigma-memory) reaches the windows' sigma and nothing
// else: the same run with it and without has the same lines, and a sigma
// as wide or wider in every window, wider in some.
TEST(ClusterSimulator, TheSigmaMemoryOnlyWidensTheSigma) {
  const SigmaOnlyComparison r = CompareSigmaOnly([](SimConfig& c) { c.sigma.sigma_memory = 0; },
                                                 [](SimConfig& c) { c.sigma.sigma_memory = 0.75; });
  EXPECT_EQ(r.narrower, 0) << "the memory only widens";
  EXPECT_GT(r.wider, 0) << "no window's sigma dipped under the memory";
}

// How a long span stretches the sigma's trend (--sigma-history-span-power)
// reaches the windows' sigma and nothing else: the same lines, and some
// windows' sigma changed.
TEST(ClusterSimulator, TheTrendsStretchChangesOnlyTheSigma) {
  const SigmaOnlyComparison r = CompareSigmaOnly([](SimConfig& c) { c.sigma.history_span_power = 1.0; },
                                                 [](SimConfig& c) { c.sigma.history_span_power = 0.5; });
  EXPECT_GT(r.narrower + r.wider, 0) << "no window's span stretched its trend";
}

// A node disciplined as timesyncd disciplines it, polling every 4 s with
// noisy offsets: REALTIME stays near true time while its rate swings by
// ppm; F minus the oscillator's own wander is a straight line, REALTIME's
// is not; and each view reads, inverts and maps into the other.
TEST(SimNodeClock, AKernelPllKeepsRealtimeNearTrueWhileFFollowsTheOscillator) {
  constexpr int64_t kBegin = 1'790'000'000'000'000'000, kSecond = 1'000'000'000;
  ClockParams p;
  p.offset_ns = 30e6;
  p.drift = 50e-6;
  p.wander_ns_per_sqrt_s = 5;
  DisciplineParams d;
  d.poll_ns = 4 * kSecond;
  d.measurement_noise_ns = 20'000;
  const SimNodeClock clk(SimClock(p, kBegin, kBegin, kBegin + 600 * kSecond, 7), d, kBegin, kBegin + 600 * kSecond, 8);
  ASSERT_TRUE(clk.disciplined());
  const DisciplineStats& s = clk.discipline_stats();
  EXPECT_EQ(s.updates, 150);
  EXPECT_LT(s.max_abs_realtime_ns, 500'000.0);  // the oscillator alone is 30 ms off
  EXPECT_GT(s.rate_max_ppm - s.rate_min_ppm, 1.0);
  EXPECT_NEAR((s.rate_max_ppm + s.rate_min_ppm) / 2, -50.0, 20.0);  // it cancels the oscillator's drift

  const SimClock& osc = clk.oscillator();
  // Deviation less the oscillator's wander, at three equally spaced instants.
  const auto bend = [&](ClockView v, int64_t t0) {
    const auto less_wander = [&](int64_t t) {
      return clk.DeviationNs(v, t) - (osc.DeviationNs(t) - p.drift * static_cast<double>(t - kBegin));
    };
    const int64_t h = 100 * kSecond;
    return less_wander(t0) - 2 * less_wander(t0 + h) + less_wander(t0 + 2 * h);
  };
  double worst_fit = 0, worst_realtime = 0;
  for (int64_t t0 = kBegin + kSecond; t0 < kBegin + 390 * kSecond; t0 += 37 * kSecond) {
    worst_fit = std::max(worst_fit, std::fabs(bend(ClockView::kFit, t0)));
    worst_realtime = std::max(worst_realtime, std::fabs(bend(ClockView::kRealtime, t0)));
  }
  EXPECT_LT(worst_fit, 0.05);
  EXPECT_GT(worst_realtime, 100.0);

  for (ClockView v : {ClockView::kFit, ClockView::kRealtime}) {
    const int64_t t = kBegin + 123 * kSecond + 456'789;
    const int64_t reading = clk.Read(v, t);
    EXPECT_NEAR(static_cast<double>(reading - t), clk.DeviationNs(v, t), 0.5);
    EXPECT_LE(std::llabs(clk.TrueInstant(v, reading) - t), 1);
  }
  const int64_t t = kBegin + 321 * kSecond;
  EXPECT_NEAR(clk.RealtimeMinusFitNs(clk.Read(ClockView::kFit, t)),
              clk.DeviationNs(ClockView::kRealtime, t) - clk.DeviationNs(ClockView::kFit, t), 1.0);
}

TEST(SimNodeClock, WithoutADisciplineEveryViewIsTheOscillator) {
  SimConfig c = SmallCluster();
  c.discipline.model = SimDiscipline::kNone;
  const ClusterSimulator sim(c);
  const SimNodeClock& clk = sim.clock(5);
  EXPECT_FALSE(clk.disciplined());
  for (int64_t t = c.start_ns; t < c.start_ns + 6'000'000'000; t += 777'777'777) {
    EXPECT_EQ(clk.Read(ClockView::kFit, t), clk.oscillator().Read(t));
    EXPECT_EQ(clk.Read(ClockView::kRealtime, t), clk.oscillator().Read(t));
    EXPECT_EQ(clk.RealtimeMinusFitNs(clk.Read(t)), 0.0);
  }
}

// The same cluster under a daemon that swings REALTIME's rate by tens of
// ppm: fitted on the fit clocks the estimates and the solve err as on
// undisciplined clocks, and so does the solution mapped back to REALTIME
// (which, left unmapped, would be µs off); fitted on REALTIME they err by
// what the daemon bent within each span.
TEST(ClusterSimulator, TheFitClockKeepsTheDisciplineOutOfTheEstimates) {
  SimConfig c = SmallCluster();
  c.windows = 20;
  c.discipline.poll_ns = 4'000'000'000;
  c.discipline.measurement_noise_ns = 50'000;
  const SolverOptions named = NamedReference(0, c);
  const auto run = [&](SimDiscipline model, FitClockMode fit_clock) {
    SimConfig rc = c;
    rc.discipline.model = model;
    rc.discipline.fit_clock = fit_clock;
    const ClusterSimulator sim(rc);
    return Evaluate(sim, sim.SimulateAll(), named);
  };
  const AccuracyReport undisciplined = run(SimDiscipline::kNone, FitClockMode::kRaw);
  const AccuracyReport on_fit = run(SimDiscipline::kKernelPll, FitClockMode::kRaw);
  const AccuracyReport on_realtime = run(SimDiscipline::kKernelPll, FitClockMode::kRealtime);
  ASSERT_EQ(on_fit.global.error.samples, 20u * 7);
  EXPECT_LT(on_fit.windows.edge_error.p99_ns, 2 * undisciplined.windows.edge_error.p99_ns + 5);
  EXPECT_LT(on_fit.global.error.p99_ns, 2 * undisciplined.global.error.p99_ns + 5);
  EXPECT_LT(on_fit.global_realtime.error.p99_ns, 2 * undisciplined.global.error.p99_ns + 5);
  EXPECT_EQ(on_fit.global_realtime.error.samples, on_fit.global.error.samples);
  EXPECT_GT(on_realtime.global.error.p99_ns, 10 * on_fit.global.error.p99_ns + 300);

  // Unmapped, the offsets on F are not REALTIME's.
  SimConfig rc = c;
  const ClusterSimulator sim(rc);
  const std::vector<EdgeEstimate> estimates = UsableEstimates(sim.SimulateAll());
  const int64_t T = sim.ReferenceInstants()[10];
  const SolveResult r = Solve(EstimatesNear(estimates, T, named.validity_horizon_ns), T, named);
  std::vector<uint32_t> nodes;
  for (const NodeSolution& n : r.nodes) nodes.push_back(n.node);
  const std::vector<double> realtime_truth = TrueOffsets(sim, T, 0, nodes, ClockView::kRealtime);
  double worst_unmapped = 0;
  for (size_t i = 0; i < nodes.size(); ++i)
    worst_unmapped = std::max(worst_unmapped, std::fabs(r.nodes[i].offset_ns - realtime_truth[i]));
  EXPECT_GT(worst_unmapped, 1000.0);
  for (const auto& [error, sigma] : RealtimeSolutionErrors(sim, r)) EXPECT_LT(std::fabs(error), 200.0);
}

}  // namespace
}  // namespace chronolink::sim
