// What the collector costs a GPU node: CPU of the sampler per second of
// sampling, at several periods, on the simulated GPU (a test double: its
// counter read is a function call, where a real device's is an ioctl or a
// driver call, so this is the collector's own share), with no activity, so
// the figure is the sampling alone. Prints one row per setting.
//
//   build/bench/collector_cost_bench [--seconds 5]
#include <sys/resource.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "collector/api/collector.h"

namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double WallSeconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
  }
  spdlog::set_level(spdlog::level::warn);
  std::printf("collector sampling cost, simulated GPU, %.0f s per row (CPU of the whole process)\n", seconds);
  std::printf("%8s %8s %6s %12s %14s %14s\n", "devices", "period", "reads", "samples/s", "CPU % of core",
              "us per sample");
  for (int devices : {1, 8}) {
    for (int period_ms : {1000, 100, 10}) {
      chronolink::collector::CollectorOptions o;
      o.backend = "simulated";
      // Almost no workload (a kernel a second), reads as fast as a driver call.
      o.backend_settings = {"devices=" + std::to_string(devices), "kernel_interval_us=1000000",
                            "latency_ns=200", "jitter_ns=50", "slow_read_prob=0"};
      o.sample_period_ns = int64_t{period_ms} * 1'000'000;
      o.host = "bench";
      std::string error;
      auto c = chronolink::collector::Collector::Create(o, &error);
      if (!c || !c->Start(&error)) {
        std::fprintf(stderr, "collector: %s\n", error.c_str());
        return 1;
      }
      const double cpu0 = CpuSeconds(), wall0 = WallSeconds();
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      const double cpu = CpuSeconds() - cpu0, wall = WallSeconds() - wall0;
      const auto status = c->Status();
      c->Stop();
      uint64_t samples = 0;
      for (const auto& m : status.maps) samples += m.samples;
      std::printf("%8d %6d ms %6d %12.1f %14.3f %14.1f\n", devices, period_ms, o.reads_per_sample,
                  static_cast<double>(samples) / wall, 100.0 * cpu / wall,
                  samples ? 1e6 * cpu / static_cast<double>(samples) : 0.0);
    }
  }
  return 0;
}
