// What a host-clock -> cluster-clock conversion through the agent's clock
// page costs a collector (include/chronolink/clock_mapping_page.h), next to
// the clock_gettime(CLOCK_REALTIME) it adds to: ReadClockMapping (seqlock)
// + ToCluster on a page in this process's memory, and on a real /dev/shm
// page written by a ClockMappingPublisher in another thread, once a
// millisecond (far more often than an agent publishes) or flat out (the
// worst case for the reader's retries). Google Benchmark; ns per call.
//
//   clock_page_bench [--benchmark_repetitions=5 ...]
#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "agent/export/clock_mapping_publisher.h"
#include "include/chronolink/clock_mapping_page.h"

namespace {

using chronolink::ClockMapping;
using chronolink::ClockMappingPage;

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

ClockMapping SampleMapping(int64_t offset_ns) {
  ClockMapping m;
  m.node_id = 7;
  m.valid = true;
  m.local_ref_ns = RealtimeNs();  // kNodeRealtime
  m.offset_ns = offset_ns;        // cluster - local
  m.drift_ppt = 12'345'678;       // 12 ppm
  m.uncertainty_ns = 800;
  m.uncertainty_growth_ppt = 1'000'000;  // 1 ppm
  m.valid_until_ns = m.local_ref_ns + 60'000'000'000;
  return m;
}

void FillPage(ClockMappingPage* page, const ClockMapping& m) {
  page->magic.store(chronolink::kClockPageMagic);
  page->version.store(chronolink::kClockPageVersion);
  page->seq.store(0);
  page->node_id.store(m.node_id);
  page->flags.store(chronolink::kClockPageValid);
  page->local_ref_ns.store(m.local_ref_ns);
  page->offset_ns.store(m.offset_ns);
  page->drift_ppt.store(m.drift_ppt);
  page->uncertainty_ns.store(m.uncertainty_ns);
  page->uncertainty_growth_ppt.store(m.uncertainty_growth_ppt);
  page->valid_until_ns.store(m.valid_until_ns);
}

void BM_ClockGettimeRealtime(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(RealtimeNs());
}
BENCHMARK(BM_ClockGettimeRealtime);

// The page in ordinary memory, no writer: the seqlock read and the 128-bit
// drift product alone, at a fixed local instant.
void BM_PageInMemory_ReadAndConvert(benchmark::State& state) {
  ClockMappingPage page{};
  FillPage(&page, SampleMapping(1'500'000));
  const int64_t local_ns = RealtimeNs();
  for (auto _ : state) {
    ClockMapping m;
    benchmark::DoNotOptimize(chronolink::ReadClockMapping(page, &m));
    benchmark::DoNotOptimize(m.ToCluster(local_ns));
    benchmark::DoNotOptimize(m.UncertaintyAt(local_ns));
  }
}
BENCHMARK(BM_PageInMemory_ReadAndConvert);

// "Now, in cluster time": clock_gettime + page read + conversion.
void BM_PageInMemory_NowInCluster(benchmark::State& state) {
  ClockMappingPage page{};
  FillPage(&page, SampleMapping(1'500'000));
  for (auto _ : state) {
    ClockMapping m;
    chronolink::ReadClockMapping(page, &m);
    benchmark::DoNotOptimize(m.ToCluster(RealtimeNs()));
  }
}
BENCHMARK(BM_PageInMemory_NowInCluster);

// A /dev/shm page with a publisher thread: publishes every `pause` (0: as
// fast as it can) until stopped.
class ShmPageWithWriter {
 public:
  explicit ShmPageWithWriter(std::chrono::microseconds pause)
      : path_("/dev/shm/chronolink-bench-" + std::to_string(::getpid())) {
    std::string error;
    if (!publisher_.Open(path_, 7, &error) || !reader_.Open(path_)) {
      error_ = error.empty() ? "cannot map " + path_ : error;
      return;
    }
    publisher_.Publish(SampleMapping(0));
    writer_ = std::thread([this, pause] {
      int64_t offset = 0;
      while (!stop_.load(std::memory_order_relaxed)) {
        publisher_.Publish(SampleMapping(++offset));
        publishes_.fetch_add(1, std::memory_order_relaxed);
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
      }
    });
  }
  ~ShmPageWithWriter() {
    stop_.store(true);
    if (writer_.joinable()) writer_.join();
    reader_.Close();
    publisher_.Close();
    ::unlink(path_.c_str());
  }
  const std::string& error() const { return error_; }
  const chronolink::ClockMappingReader& reader() const { return reader_; }
  uint64_t publishes() const { return publishes_.load(); }

 private:
  std::string path_;
  std::string error_;
  chronolink::ClockMappingPublisher publisher_;
  chronolink::ClockMappingReader reader_;
  std::thread writer_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> publishes_{0};
};

void ShmReadAndConvert(benchmark::State& state, std::chrono::microseconds pause) {
  ShmPageWithWriter shm(pause);
  if (!shm.error().empty()) {
    state.SkipWithError(shm.error().c_str());
    return;
  }
  const int64_t local_ns = RealtimeNs();
  int64_t failed = 0;
  const uint64_t publishes_before = shm.publishes();
  for (auto _ : state) {
    ClockMapping m;
    if (!shm.reader().Read(&m)) ++failed;
    benchmark::DoNotOptimize(m.ToCluster(local_ns));
    benchmark::DoNotOptimize(m.UncertaintyAt(local_ns));
  }
  // A failed read is ReadClockMapping giving up after its 1000 attempts
  // found the writer inside every time.
  state.counters["failed_per_read"] =
      benchmark::Counter(static_cast<double>(failed), benchmark::Counter::kAvgIterations);
  state.counters["publishes_per_s"] = benchmark::Counter(
      static_cast<double>(shm.publishes() - publishes_before), benchmark::Counter::kIsRate);
}

void BM_PageShm_WriterEveryMs(benchmark::State& state) {
  ShmReadAndConvert(state, std::chrono::microseconds(1'000));
}
BENCHMARK(BM_PageShm_WriterEveryMs)->UseRealTime();

void BM_PageShm_WriterFlatOut(benchmark::State& state) {
  ShmReadAndConvert(state, std::chrono::microseconds(0));
}
BENCHMARK(BM_PageShm_WriterFlatOut)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
