// FitMaxMarginLine against libsvm's linear C-SVC on realistic windows.
//
// A window: n bounds (n/2 upper, n/2 lower) over one second of epoch time
// (x ~ 1.7e18 ns), peer offset -3.456789 ms, drift 20 ppm, one-way delays of
// 10 us plus an exponential excess (mean 5 us) and, on one packet in 20, a
// queueing delay of up to 200 us.
//
// libsvm gets the same points as doubles in sheared, scaled coordinates:
//   x' = (x - x0) / 1e8,   y' = (y - y_ref - c (x - x0)) / 1e3,
// c = 20e-6 (the simulated drift). Shearing y by c x and rescaling x leave the
// VERTICAL max-margin problem unchanged (every vertical distance is the same,
// lines map to lines), and in these coordinates the optimal line's slope is
// (alpha - c) 1e5 ~ 1e-3, where the Euclidean margin libsvm maximises equals
// the vertical one up to sqrt(1 + 1e-6). On raw ns (or isotropically scaled)
// coordinates the window is 1e9 wide and the margin 1e4 high: libsvm's
// single-precision kernel cache would drown the y information, and the raw
// epoch values (~1e18) would not even survive conversion to double.
//
// After the Google Benchmark table, a summary prints per size: both CPU times,
// their ratio, and the agreement (max |dy| over the window between the two
// lines, in ns) next to the margin.
#include <benchmark/benchmark.h>
#include <svm.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/support/linear_svm_reference.h"
#include "agent/estimate/max_margin_fit.h"

namespace chronolink {
namespace {

constexpr int64_t kX0 = 1'700'000'000'500'000'000;  // window midpoint
constexpr int64_t kTheta0 = -3'456'789;
constexpr double kXUnit = 1e8;
constexpr double kYUnit = 1e3;
constexpr double kShear = 20e-6;  // the simulated drift, taken out before libsvm

struct Window {
  std::vector<OffsetBound> upper, lower;
  int64_t x0 = kX0;
  int64_t y_ref = 0;  // set from the data
};

int64_t Theta(int64_t t) {  // peer - local at local instant t: 20 ppm drift
  return kTheta0 + (t - kX0) / 50'000;
}

const Window& GetWindow(int n) {
  static std::map<int, Window> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::mt19937_64 rng(1234 + static_cast<uint64_t>(n));
  std::exponential_distribution<double> excess(1.0 / 5000.0);
  std::uniform_real_distribution<double> u01(0, 1);
  auto delay = [&] {
    int64_t d = 10'000 + static_cast<int64_t>(excess(rng));
    if (u01(rng) < 0.05) d += static_cast<int64_t>(u01(rng) * 200'000);
    return d;
  };
  Window w;
  const int half = n / 2;
  const int64_t start = kX0 - 500'000'000;
  for (int k = 0; k < half; ++k) {
    const int64_t t = start + static_cast<int64_t>(k) * (1'000'000'000 / half);
    const int64_t df = delay();
    w.upper.push_back({t, Theta(t + df) + df});  // rx_peer - tx_local
    const int64_t sent = t + df + 20'000;        // the reply leaves the peer
    const int64_t dr = delay();
    w.lower.push_back({sent + dr, Theta(sent) - dr});  // tx_peer - rx_local
  }
  w.y_ref = (w.upper[0].y_ns + w.lower[0].y_ns) / 2;
  return cache.emplace(n, std::move(w)).first->second;
}

struct SvmProblem {
  std::vector<svm_node> nodes;
  std::vector<svm_node*> xs;
  std::vector<double> ys;
  svm_problem prob{};
};

void BuildProblem(const Window& w, SvmProblem* p) {
  const size_t n = w.upper.size() + w.lower.size();
  p->nodes.resize(3 * n);
  p->xs.resize(n);
  p->ys.resize(n);
  size_t k = 0;
  for (const auto* set : {&w.upper, &w.lower}) {
    for (const OffsetBound& b : *set) {
      svm_node* node = &p->nodes[3 * k];
      const double dx = static_cast<double>(b.x_ns - w.x0);  // int64 differences first
      const double dy = static_cast<double>(b.y_ns - w.y_ref);
      node[0] = {1, dx / kXUnit};
      node[1] = {2, (dy - kShear * dx) / kYUnit};
      node[2] = {-1, 0.0};
      p->xs[k] = node;
      p->ys[k] = set == &w.upper ? 1.0 : -1.0;
      ++k;
    }
  }
  p->prob.l = static_cast<int>(n);
  p->prob.y = p->ys.data();
  p->prob.x = p->xs.data();
}

svm_parameter SvmParams() {
  svm_parameter param{};
  param.svm_type = C_SVC;
  param.kernel_type = LINEAR;
  param.C = 1e4;  // hard margin: the margin is ~10 units, so sum(alpha) ~ 1e-2
  param.eps = 1e-4;
  param.cache_size = 200;
  param.shrinking = 1;
  return param;
}

struct Line {
  double alpha = 0, beta_ns = 0;  // y = y_ref + beta + alpha (x - x0), beta relative to y_ref
};

Line TrainLibsvm(const SvmProblem& p) {
  const svm_parameter param = SvmParams();
  const auto [w1, w2, rho] = chronolink::testing::SolveLinearSvm(p.prob, param);
  // w1 x' + w2 y' = rho with x' = dx / kXUnit, y' = (dy - kShear dx) / kYUnit.
  Line l;
  l.alpha = kShear - w1 / w2 * kYUnit / kXUnit;
  l.beta_ns = rho / w2 * kYUnit;
  return l;
}

// The hard margin's line: what libsvm is compared with.
MaxMarginOptions HardMargin() {
  MaxMarginOptions o;
  o.floor_points = 1;
  return o;
}

void BM_MaxMargin(benchmark::State& state) {
  const Window& w = GetWindow(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    LineFit f = FitMaxMarginLine(w.upper, w.lower, w.x0, HardMargin());
    benchmark::DoNotOptimize(f);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_MaxMargin)->Arg(1000)->Arg(4000)->Arg(16000)->Unit(benchmark::kMicrosecond);

// The agent's default: the hard line, then the line on the mean of the 8
// deepest bounds per side (docs/estimator.md §4b), a bisection of O(n) steps.
void BM_MaxMarginFloors(benchmark::State& state) {
  const Window& w = GetWindow(static_cast<int>(state.range(0)));
  int floor_points = 0;
  for (auto _ : state) {
    LineFit f = FitMaxMarginLine(w.upper, w.lower, w.x0);
    floor_points = f.floor_points;
    benchmark::DoNotOptimize(f);
  }
  state.counters["floor_points"] = floor_points;
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_MaxMarginFloors)->Arg(1000)->Arg(4000)->Arg(16000)->Unit(benchmark::kMicrosecond);

// The same without the pruning: every bound at every bisection step (the
// simple path the fast one is checked against).
void BM_MaxMarginFloorsEveryBound(benchmark::State& state) {
  const Window& w = GetWindow(static_cast<int>(state.range(0)));
  MaxMarginOptions o;
  o.prune_floor_candidates = false;
  for (auto _ : state) {
    LineFit f = FitMaxMarginLine(w.upper, w.lower, w.x0, o);
    benchmark::DoNotOptimize(f);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_MaxMarginFloorsEveryBound)->Arg(1000)->Arg(4000)->Arg(16000)->Unit(benchmark::kMicrosecond);

// The soft-margin path: 0.5 % of the forward bounds carry a receive stamp
// 50 us early (below the line), so the fit sets them aside one by one
// (each round re-hulls the window: O(n) per violator).
void BM_MaxMarginWithViolators(benchmark::State& state) {
  const Window& w = GetWindow(static_cast<int>(state.range(0)));
  std::vector<OffsetBound> upper = w.upper;
  const size_t bad = upper.size() / 200;
  for (size_t k = 0; k < bad; ++k) upper[(k * 7919) % upper.size()].y_ns -= 50'000;
  int removed = 0;
  for (auto _ : state) {
    LineFit f = FitMaxMarginLine(upper, w.lower, w.x0, HardMargin());
    removed = f.violators_removed;
    benchmark::DoNotOptimize(f);
  }
  state.counters["violators"] = removed;
}
BENCHMARK(BM_MaxMarginWithViolators)->Arg(4000)->Unit(benchmark::kMicrosecond);

void BM_Libsvm(benchmark::State& state) {
  const Window& w = GetWindow(static_cast<int>(state.range(0)));
  SvmProblem p;
  BuildProblem(w, &p);
  for (auto _ : state) {
    Line l = TrainLibsvm(p);
    benchmark::DoNotOptimize(l);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Libsvm)->Arg(1000)->Arg(4000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Libsvm)->Arg(16000)->Iterations(3)->Unit(benchmark::kMicrosecond);

// Records each run's time (in microseconds) while printing the usual table.
class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  explicit CapturingReporter(OutputOptions opts) : ConsoleReporter(opts) {}
  std::map<std::string, double> us;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;
      std::string name = r.benchmark_name();
      const size_t cut = name.find("/iterations:");
      if (cut != std::string::npos) name.resize(cut);
      // CPU time: the development machines are shared, and wall time there
      // includes other processes; all cases use kMicrosecond.
      us[name] = r.GetAdjustedCPUTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

void PrintSummary(const CapturingReporter& rep) {
  std::printf("\n%8s %12s %12s %10s %14s %12s %12s\n", "points", "ours_cpu_us", "libsvm_cpu_us", "ratio",
              "max|dy|_ns", "margin_ns", "svm_marg_ns");
  for (int n : {1000, 4000, 16000}) {
    const Window& w = GetWindow(n);
    const LineFit f = FitMaxMarginLine(w.upper, w.lower, w.x0, HardMargin());
    SvmProblem p;
    BuildProblem(w, &p);
    const Line s = TrainLibsvm(p);
    // Both lines relative to (x0, y_ref); the difference is linear in x, so
    // its maximum over the window is at an end.
    const double ours_beta = f.beta_ns - static_cast<double>(w.y_ref);
    double dy = 0;
    double svm_margin = 1e300;
    for (const auto* set : {&w.upper, &w.lower}) {
      for (const OffsetBound& b : *set) {
        const double dx = static_cast<double>(b.x_ns - w.x0);
        const double ys = s.beta_ns + s.alpha * dx;
        dy = std::max(dy, std::abs((ours_beta + f.alpha * dx) - ys));
        const double dyp = static_cast<double>(b.y_ns - w.y_ref);
        svm_margin = std::min(svm_margin, set == &w.upper ? dyp - ys : ys - dyp);
      }
    }
    const std::string k = "/" + std::to_string(n);
    const auto ours = rep.us.find("BM_MaxMargin" + k);
    const auto theirs = rep.us.find("BM_Libsvm" + k);
    const bool have = ours != rep.us.end() && theirs != rep.us.end();
    auto fmt = [](double v, bool ok) {
      char buf[32];
      if (ok) {
        std::snprintf(buf, sizeof buf, "%.2f", v);
      } else {
        std::snprintf(buf, sizeof buf, "n/a");
      }
      return std::string(buf);
    };
    const double t_ours = ours != rep.us.end() ? ours->second : 0.0;
    const double t_svm = theirs != rep.us.end() ? theirs->second : 0.0;
    std::printf("%8d %12s %12s %10s %14.4f %12.3f %12.3f%s\n", n, fmt(t_ours, ours != rep.us.end()).c_str(),
                fmt(t_svm, theirs != rep.us.end()).c_str(), fmt(t_svm / t_ours, have).c_str(), dy, f.margin_ns,
                svm_margin, f.ok ? "" : "  (fit failed)");
  }
  std::printf("(svm_marg_ns: the vertical margin libsvm's line keeps; ours is the optimum, so it is >= that)\n");
}

}  // namespace
}  // namespace chronolink

int main(int argc, char** argv) {
  svm_set_print_string_function([](const char*) {});
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  chronolink::CapturingReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Defaults
                                                               : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  chronolink::PrintSummary(reporter);
  benchmark::Shutdown();
  return 0;
}
