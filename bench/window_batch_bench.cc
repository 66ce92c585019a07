// What the leader spends decoding one node's window batch (six summaries
// with the fit point, anchor and knots, as coordination_load_bench's
// simulated nodes and real agents send them): at 10 000 nodes it decodes
// 5 000 a second (docs/PERFORMANCE.md §15f).
//
//   build/bench/window_batch_bench
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "agent/cluster/probe_graph.h"
#include "bench/coordination/window_summaries.h"

namespace chronolink {
namespace {

std::string OneNodesBatch() {
  std::vector<uint32_t> members;
  for (uint32_t i = 1; i <= 100; ++i) members.push_back(i);
  const ProbeGraph graph = ProbeGraph::Build(members, ProbeGraphOptions{});
  const bench::WindowSummarySource source(graph, 1);
  return EncodeWindowBatch(source.Window(7, 12345, 2'000'000'000));
}

void BM_DecodeWindowBatch(benchmark::State& state) {
  const std::string text = OneNodesBatch();
  std::vector<WindowSummary> out;
  std::string error;
  for (auto _ : state) {
    if (!DecodeWindowBatch(text, &out, &error)) state.SkipWithError(error.c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(text.size());
  state.counters["summaries"] = static_cast<double>(out.size());
}
BENCHMARK(BM_DecodeWindowBatch);

}  // namespace
}  // namespace chronolink

BENCHMARK_MAIN();
