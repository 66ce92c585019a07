// What closing one window costs an edge in the agent's estimation
// (EdgeWindows::CloseUpTo: the span's fit, its later half's where that is
// on, the span chooser's own-window fit, the sigma), at the test bed's
// cadence under load: 40 pairs of our own and 40 of the peer's session per
// 2 s window, so a 20 s span fits 800 tuples. Queueing Exp(2 us) on 10 us
// each way, and the offset wanders 5 ns/sqrt(s), so the chooser holds the
// longest span as it does there. After the table, a summary prints the
// share of a core per edge each costs (one close per 2 s): the estimator's
// part of the CPU per edge that accuracy_bench prints for the whole agent.
//
//   build/bench/edge_window_close_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "agent/estimate/edge_windows.h"

namespace chronolink {
namespace {

constexpr int64_t kWindow = 2'000'000'000;
constexpr int64_t kBase = 1'790'000'000'000'000'000LL;  // a multiple of the window
constexpr int64_t kPairEveryNs = 50'000'000;            // our 40 per window, and the peer's 40 between them

DualStamp Kernel(int64_t ns) { return DualStamp{{ns, StampSource::kSocketSoftware}, {ns, StampSource::kUserspace}}; }

class PathOfTuples {
 public:
  explicit PathOfTuples(uint32_t seed) : rng_(seed) {}
  FullTuple At(int64_t t, bool peer_session) {
    walk_ += 5.0 * std::sqrt(static_cast<double>(kPairEveryNs) / 1e9) * gauss_(rng_);
    const auto offset = static_cast<int64_t>(3'700'000 + walk_);
    FullTuple f;
    f.seq = ++seq_;
    f.created_ns = t;
    f.peer_session = peer_session;
    for (int i = 0; i < 2; ++i) {
      const int64_t tx = t + i * 100'000;
      f.fwd_tx[i] = Kernel(tx);
      f.fwd_rx[i] = Kernel(tx + 10'000 + Queue() + offset);
      f.rev_tx[i] = Kernel(f.fwd_rx[i].kernel.ns + 20'000);
      f.rev_rx[i] = Kernel(f.rev_tx[i].kernel.ns - offset + 10'000 + Queue());
    }
    return f;
  }

 private:
  int64_t Queue() { return static_cast<int64_t>(queue_(rng_)); }
  std::mt19937 rng_;
  std::exponential_distribution<double> queue_{1 / 2000.0};
  std::normal_distribution<double> gauss_;
  double walk_ = 0;
  uint64_t seq_ = 0;
};

std::map<bool, double> g_close_us;  // later half on/off -> CPU µs per close

void BM_EdgeWindowClose(benchmark::State& state) {
  const bool later_half = state.range(0) != 0;
  FitSpanRange spans = FitSpanRange::Of(kWindow, 0, 0);  // the agent's defaults: 6 s centred, 20 s in all
  spans.later_half = later_half;
  EdgeWindows windows(1, 2, kWindow, {SourceClass::kKernel}, {}, {}, spans);
  PathOfTuples path(7);
  std::vector<EdgeWindowRecord> out;
  int64_t t = kBase - 12 * kWindow;
  // Feeds one window's tuples, ours and the peer's alternately.
  const auto feed_window = [&] {
    for (const int64_t end = t + kWindow; t < end; t += kPairEveryNs / 2) {
      const bool peer = (t / (kPairEveryNs / 2)) % 2 != 0;
      if (!peer) windows.OnPairSent(t);
      const FullTuple f = path.At(t, peer);
      peer ? windows.OnPeerTuple(f) : windows.OnTupleFinalized(f);
    }
  };
  // Warm up past the chooser's 16 windows, so every close is a steady one.
  for (int i = 0; i < 40; ++i) {
    feed_window();
    windows.CloseUpTo(windows.ClosableBefore(t), &out);
  }
  int halves = 0;
  for (auto _ : state) {
    state.PauseTiming();
    out.clear();
    feed_window();
    state.ResumeTiming();
    windows.CloseUpTo(windows.ClosableBefore(t), &out);
    benchmark::DoNotOptimize(out);
    state.PauseTiming();
    for (const EdgeWindowRecord& r : out) halves += r.later_half.has_value();
    state.ResumeTiming();
  }
  state.counters["with_half"] = static_cast<double>(halves) / static_cast<double>(state.iterations());
  state.counters["tuples"] = out.empty() ? 0 : out.back().estimate.tuples;
}
BENCHMARK(BM_EdgeWindowClose)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      g_close_us[r.run_name.args == "1"] = r.GetAdjustedCPUTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace
}  // namespace chronolink

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  chronolink::CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::printf("\nCPU per edge of the window closes (one every 2 s):\n");
  for (const auto& [half, us] : chronolink::g_close_us) {
    std::printf("  later half %-3s %8.1f us per close = %.4f %% of a core\n", half ? "on" : "off", us,
                us / 2e6 * 100.0);
  }
  return 0;
}
