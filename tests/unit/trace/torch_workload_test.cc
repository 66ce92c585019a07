// The real trace producer: a 2-rank PyTorch gloo job on loopback
// (tools/testbed/trace_workload.py --loopback, no namespaces, no root), each
// rank under the clock shim with a different virtual clock. Checks that each
// rank wrote a legacy-profiler trace with its collectives, that the origin
// file puts ts = 0 on the rank's skewed clock (between the virtual-clock
// images of a raw, unskewable bracket of the profiler's start), and that the
// events run at the skewed RATE too: with a clock 5 % slow, stamps on the
// real rate would end milliseconds after the virtual image of a raw reading
// taken once the last event had ended.
//
// Needs Debian's /usr/bin/python3 with python3-torch: skipped without it,
// except under CI, where that is a failure (tests/support/ci_rule.h).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "clock/virtual_clock.cc"  // the agent's arithmetic, without linking the agent
#include "tests/support/ci_rule.h"
#include "tests/support/run_process.h"

#ifndef CHRONOLINK_CLOCK_SHIM_SO
#error "CHRONOLINK_CLOCK_SHIM_SO (path of libchronolink_clock_shim.so) must be defined by CMake"
#endif

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;
using chronolink::testing::ProcessResult;
using chronolink::testing::RunProcess;
using nlohmann::json;

constexpr char kPython[] = "/usr/bin/python3";
constexpr int kIterations = 6;
constexpr int kSizesPerIteration = 3;  // torch_allreduce_job.py's default --sizes
constexpr int64_t kNsPerUs = 1'000;

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

json ReadJson(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f, nullptr, /*allow_exceptions=*/false);
}

class TorchWorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ProcessResult r = RunProcess(
        {kPython, "-c", "import torch, torch.distributed as d; assert d.is_gloo_available()"}, {},
        std::chrono::seconds(120));
    if (r.exit_code != 0) {
      CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI(std::string(kPython) +
                                         " cannot run torch with gloo (install python3-torch): " +
                                         r.err.substr(r.err.size() > 300 ? r.err.size() - 300 : 0));
    }
    char tmpl[] = "/tmp/torch_workload_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  fs::path dir_;
};

struct RankTrace {
  std::map<std::string, int> counts;
  int64_t min_ts_us = INT64_MAX;
  int64_t last_iteration_end_us = INT64_MIN;  // the caller's thread: its events end before
                                              // the job's after-last-event reading
};

RankTrace Summarise(const json& events) {
  RankTrace t;
  for (const auto& e : events) {
    const std::string name = e.value("name", "");
    const int64_t ts = e.value("ts", int64_t{0});
    ++t.counts[name];
    t.min_ts_us = std::min(t.min_ts_us, ts);
    if (name.rfind("iteration#", 0) == 0) {
      t.last_iteration_end_us = std::max(t.last_iteration_end_us, ts + e.value("dur", int64_t{0}));
    }
  }
  return t;
}

TEST_F(TorchWorkloadTest, EachRankStampsItsTraceOnItsOwnSkewedClock) {
  const int64_t t0 = RealtimeNs() - 10'000'000'000;
  const std::map<int, VirtualClockParams> clocks = {{1, {30'000'000, 40000.0, t0}},
                                                    {2, {-20'000'000, -50000.0, t0}}};
  const ProcessResult run = RunProcess(
      {kPython, std::string(CHRONOLINK_SOURCE_DIR) + "/tools/testbed/trace_workload.py", "--loopback",
       "--nodes", "2", "--out", dir_.string(), "--shim", CHRONOLINK_CLOCK_SHIM_SO, "--iterations",
       std::to_string(kIterations), "--t0-ns", std::to_string(t0), "--clock", "1:30000000:40000",
       "--clock", "2:-20000000:-50000", "--timeout-s", "60", "--job-timeout-s", "150"},
      {{"CHRONOLINK_TESTBED_QUIET", "1"}}, std::chrono::seconds(200));
  ASSERT_FALSE(run.timed_out) << run.out << run.err;
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  const json truth = ReadJson(dir_ / "truth.json");
  ASSERT_TRUE(truth.is_object()) << "truth.json";
  ASSERT_EQ(truth.size(), 2u) << truth.dump();
  for (const auto& [node, params] : clocks) {
    const std::string host = "node" + std::to_string(node);
    SCOPED_TRACE(host);
    ASSERT_TRUE(truth.contains(host)) << truth.dump();
    EXPECT_EQ(truth[host]["offset_ns"].get<int64_t>(), params.offset_ns);
    EXPECT_EQ(truth[host]["drift_ppm"].get<double>(), params.drift_ppm);
    EXPECT_EQ(truth[host]["t0_ns"].get<int64_t>(), t0);
    const int rank = truth[host]["rank"].get<int>();
    const fs::path trace_path = dir_ / ("rank" + std::to_string(rank) + ".json");

    const json events = ReadJson(trace_path);
    ASSERT_TRUE(events.is_array()) << trace_path;
    RankTrace trace = Summarise(events);
    EXPECT_EQ(trace.counts["c10d::allreduce_"], kIterations * kSizesPerIteration);
    EXPECT_EQ(trace.counts["gloo:all_reduce"], kIterations * kSizesPerIteration);
    EXPECT_GE(trace.counts["aten::mm"], kIterations * kSizesPerIteration);
    EXPECT_GE(trace.min_ts_us, 0);

    const json origin = ReadJson(trace_path.string() + ".chronolink-origin.json");
    ASSERT_TRUE(origin.is_object());
    EXPECT_EQ(origin["schema"], "chronolink.trace_origin.v1");
    EXPECT_EQ(origin["clock"], "host_realtime");
    EXPECT_EQ(origin["host"], host);
    EXPECT_EQ(origin["rank"], rank);
    EXPECT_EQ(origin["origin_uncertainty_ns"], 0);
    const int64_t origin_ns = origin["origin_ns"].get<int64_t>();
    const auto& unskewed = origin["unskewed"];
    const VirtualClock clock(params);
    // ts = 0 is the profiler's REALTIME reading at its start, floored to the µs.
    EXPECT_LE(clock.Apply(unskewed["start_bracket_ns"][0].get<int64_t>()) - kNsPerUs, origin_ns);
    EXPECT_LE(origin_ns, clock.Apply(unskewed["start_bracket_ns"][1].get<int64_t>()));
    // The rate: the last iteration ended before the raw after-last-event
    // reading, on the virtual clock too (2 µs for the TSC conversion and the floors).
    const int64_t last_end_ns = origin_ns + trace.last_iteration_end_us * kNsPerUs;
    const int64_t after_last = clock.Apply(unskewed["after_last_event_ns"].get<int64_t>());
    EXPECT_LE(last_end_ns, after_last + 2 * kNsPerUs);
    EXPECT_GE(last_end_ns, after_last - 50'000'000) << "the last iteration ends long before the job did";
  }
}

}  // namespace
}  // namespace chronolink::trace
