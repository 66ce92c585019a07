// Global solve over a simulated cluster: the probe graph every node would
// derive (k = 6), true offsets within +/-50 ms and drifts within +/-100 ppm,
// one noisy estimate per probed direction (x0 on the prober's clock, 50 ns
// of noise, 100 ns uncertainty). Times Solve() at 1k and 10k nodes and
// prints the solution's |error| against the truth: cold (no earlier
// solution) and warm (given the solution of an instant 1 s before, as the
// leader passes the previous window's). Also times the clock pages' drift
// lines the leader draws after each solve (agent/cluster/page_drift_history.h):
// every node's line through its last 15 instants, and the probe graph with
// every node's peer list that an etcd leader builds when the members change.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "agent/cluster/page_drift_history.h"
#include "agent/cluster/probe_graph.h"
#include "agent/solve/global_solver.h"
#include "agent/solve/node_wander_meter.h"

namespace chronolink {
namespace {

constexpr int64_t kT = 1'790'000'000'000'000'000LL;

struct Cluster {
  std::vector<double> offset, drift;  // per node id, against the frame
  std::vector<EdgeEstimate> edges;
};

Cluster Simulate(uint32_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> off(-50e6, 50e6), dr(-100e-6, 100e-6);
  std::normal_distribution<double> noise(0, 50.0);
  Cluster c;
  std::vector<uint32_t> members(n);
  for (uint32_t i = 0; i < n; ++i) {
    members[i] = i;
    c.offset.push_back(off(rng));
    c.drift.push_back(dr(rng));
  }
  const ProbeGraph g = ProbeGraph::Build(members);
  for (const auto& [a0, b0] : g.edges()) {
    for (auto [a, b] : {std::pair{a0, b0}, std::pair{b0, a0}}) {
      EdgeEstimate e;
      e.node = a;
      e.peer = b;
      e.x0_ns = kT - 1'000'000'000;  // on a's clock
      const double since_T = (static_cast<double>(e.x0_ns - kT) - c.offset[a]) / (1 + c.drift[a]);
      e.alpha = (c.drift[b] - c.drift[a]) / (1 + c.drift[a]);
      e.beta_ns = c.offset[b] - c.offset[a] + (c.drift[b] - c.drift[a]) * since_T + noise(rng);
      e.uncertainty_ns = 100.0;
      c.edges.push_back(e);
    }
  }
  return c;
}

// |solved − true| offsets against node 0, at the instant node 0's clock reads T.
std::vector<double> Errors(const Cluster& c, const SolveResult& r) {
  const double t_star = -c.offset[0] / (1 + c.drift[0]);
  std::vector<double> err;
  for (const NodeSolution& s : r.nodes) {
    if (!s.reachable) continue;
    const double truth = c.offset[s.node] - c.offset[0] + (c.drift[s.node] - c.drift[0]) * t_star;
    err.push_back(std::fabs(s.offset_ns - truth));
  }
  std::sort(err.begin(), err.end());
  return err;
}

void RunSolve(benchmark::State& state, bool warm) {
  const auto n = static_cast<uint32_t>(state.range(0));
  const Cluster c = Simulate(n, 7);
  SolverOptions opt;
  opt.reference_node = 0;
  const SolveResult previous = Solve(c.edges, kT - 1'000'000'000, opt);
  SolveResult r;
  for (auto _ : state) {
    r = Solve(c.edges, kT, opt, warm ? &previous : nullptr);
    benchmark::DoNotOptimize(r.nodes.data());
  }
  const std::vector<double> err = Errors(c, r);
  state.counters["nodes"] = n;
  state.counters["irls_passes"] = r.robust_iterations;
  state.counters["estimates"] = static_cast<double>(c.edges.size());
  state.counters["p50_err_ns"] = err[err.size() / 2];
  state.counters["p99_err_ns"] = err[err.size() * 99 / 100];
  state.counters["max_err_ns"] = err.back();
}
void BM_GlobalSolve(benchmark::State& state) { RunSolve(state, false); }
void BM_GlobalSolveWarm(benchmark::State& state) { RunSolve(state, true); }
BENCHMARK(BM_GlobalSolve)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_GlobalSolveWarm)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(5);

// One instant's page drift lines for n nodes, each with a full span (15
// instants of 2 s) behind it: what the leader adds to each solve.
void BM_PageDriftLines(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> dr(-100e-6, 100e-6);
  std::normal_distribution<double> noise(0, 40.0);
  std::vector<double> drift(n);
  for (double& d : drift) d = dr(rng);
  PageDriftHistory history{PageDriftHistoryOptions{}};
  std::vector<NodeSolution> nodes(n);
  auto instant = [&](int64_t k) {
    for (uint32_t i = 0; i < n; ++i) {
      nodes[i] = NodeSolution{.node = i,
                              .reachable = true,
                              .offset_ns = drift[i] * 2e9 * k + noise(rng),
                              .drift = drift[i],
                              .uncertainty_ns = 40};
    }
    history.Apply(kT + k * 2'000'000'000, &nodes);
  };
  int64_t k = 0;
  for (; k < 15; ++k) instant(k);
  double worst_ppb = 0;
  for (auto _ : state) {
    instant(k++);
    for (uint32_t i = 0; i < n; ++i)
      worst_ppb = std::max(worst_ppb, std::fabs(nodes[i].page_drift.value_or(1) - drift[i]) * 1e9);
  }
  state.counters["nodes"] = n;
  state.counters["worst_drift_err_ppb"] = worst_ppb;  // 40 ns of noise on each offset
}
BENCHMARK(BM_PageDriftLines)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(20);

// The nodes' wander term (agent/solve/node_wander_meter.h): one window of
// every directed edge of the probe graph into the meter, then every node's
// figure for the solve, what the leader adds each window. The clocks walk
// 20 ns/√s each (node 0: 60) and every window has 10 ns of its own noise;
// prints node 0's measured walk and the median of the others'. The offsets
// here are the phase itself, not a 6 s fit's mean of it, so the meter's
// allowance for the span's smoothing reads them √(20/14) = 1.2x high (72
// and 24 ns/√s), and one node's figure from 60 windows scatters ±30 %.
void BM_NodeWanderWindow(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  std::vector<uint32_t> members(n);
  for (uint32_t i = 0; i < n; ++i) members[i] = i;
  const ProbeGraph g = ProbeGraph::Build(members);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> unit(0, 1);
  std::vector<double> phase(n, 0.0);
  NodeWanderMeter meter(2'000'000'000, 6'000'000'000);
  int64_t k = 0;
  size_t measured = 0;
  const auto window = [&] {
    for (uint32_t i = 0; i < n; ++i) phase[i] += (i == 0 ? 60.0 : 20.0) * std::sqrt(2.0) * unit(rng);
    for (const auto& [a0, b0] : g.edges()) {
      for (auto [a, b] : {std::pair{a0, b0}, std::pair{b0, a0}}) {
        EdgeEstimate e;
        e.node = a;
        e.peer = b;
        e.x0_ns = kT + k * 2'000'000'000 + 1'000'000'000;
        e.beta_ns = phase[b] - phase[a] + 10.0 * unit(rng);
        e.uncertainty_ns = 25;
        meter.Add(e, k);
      }
    }
    ++k;
    measured = meter.SharedSigmas().size();
  };
  for (int i = 0; i < 40; ++i) window();
  for (auto _ : state) window();
  std::vector<double> others;
  for (uint32_t i = 1; i < n; ++i) others.push_back(meter.WanderNsPerSqrtS(i).value_or(0));
  std::nth_element(others.begin(), others.begin() + others.size() / 2, others.end());
  state.counters["nodes"] = n;
  state.counters["nodes_measured"] = static_cast<double>(measured);
  state.counters["walker_ns_per_sqrt_s"] =
      meter.WanderNsPerSqrtS(0).value_or(0);                    // 60 walks: ~72 expected, one node ±30 %
  state.counters["others_median"] = others[others.size() / 2];  // 20 walks, read as ~24
}
BENCHMARK(BM_NodeWanderWindow)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(20);

// What an etcd leader does when the members change (at most once a second:
// agent/coord/etcd/etcd_coordinator.cc, PublishPeers): the probe graph of
// every member, and each node's neighbours for its peer list.
void BM_ProbeGraphAndPeerLists(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  std::vector<uint32_t> ids(n);
  for (uint32_t i = 0; i < n; ++i) ids[i] = 1 + i * 7;  // ids need not be dense
  size_t listed = 0;
  for (auto _ : state) {
    const ProbeGraph g = ProbeGraph::Build(ids, ProbeGraphOptions{});
    listed = 0;
    for (uint32_t id : ids) listed += g.PeersOf(id).size();
    benchmark::DoNotOptimize(listed);
  }
  state.counters["nodes"] = n;
  state.counters["mean_peers"] = static_cast<double>(listed) / n;
}
BENCHMARK(BM_ProbeGraphAndPeerLists)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(10);

}  // namespace
}  // namespace chronolink

BENCHMARK_MAIN();
