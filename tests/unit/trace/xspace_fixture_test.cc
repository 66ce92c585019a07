// The XLA-like fixture generator: its layout is what XProf expects, its
// collectives keep happens-before in true time and break it under skewed
// clocks, its truth inverts every stamp, and its run directory reads back.
#include "tools/trace_fixture/xspace_fixture.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "clock/clock_state_file.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/run_directory.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/trace_time.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;

std::vector<FixtureHost> Hosts(const XSpaceFixtureOptions& options) {
  std::vector<FixtureHost> hosts;
  std::string error;
  EXPECT_TRUE(ResolveFixtureHosts(options, &hosts, &error)) << error;
  return hosts;
}

HostTrace Generate(const XSpaceFixtureOptions& options, const FixtureHost& host) {
  HostTrace trace;
  std::string error;
  EXPECT_TRUE(GenerateFixtureHost(options, host, &trace, &error)) << error;
  return trace;
}

std::string StatStr(const xspace::XPlane& plane, const xspace::XStat& stat) {
  if (stat.value_case() == xspace::XStat::kRefValue) {
    return plane.stat_metadata().at(static_cast<int64_t>(stat.ref_value())).name();
  }
  return stat.str_value();
}

// name -> stat of one event.
std::map<std::string, const xspace::XStat*> Stats(const xspace::XPlane& plane,
                                                  const xspace::XEvent& event) {
  std::map<std::string, const xspace::XStat*> out;
  for (const auto& s : event.stats()) out[plane.stat_metadata().at(s.metadata_id()).name()] = &s;
  return out;
}

TEST(XSpaceFixtureTest, LayoutIsWhatXProfDraws) {
  XSpaceFixtureOptions options;
  options.hosts = 2;
  options.gpus_per_host = 3;
  options.steps = 2;
  options.kernels_per_step = 5;
  const auto hosts = Hosts(options);
  const HostTrace trace = Generate(options, hosts[1]);
  EXPECT_EQ(trace.host, "host1");
  ASSERT_EQ(trace.space->hostnames_size(), 1);
  EXPECT_EQ(trace.space->hostnames(0), "host1");

  const auto* cpu = FindPlane(*trace.space, "/host:CPU");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->id(), 49);
  int step_roots = 0;
  for (const auto& line : cpu->lines()) {
    for (const auto& e : line.events()) {
      const auto stats = Stats(*cpu, e);
      if (cpu->event_metadata().at(e.metadata_id()).name() != "train_step") continue;
      ASSERT_TRUE(stats.count("step_num") && stats.count("_r"));
      EXPECT_EQ(stats.at("step_num")->int64_value(), step_roots);
      EXPECT_EQ(stats.at("_r")->int64_value(), 1);
      ++step_roots;
    }
  }
  EXPECT_EQ(step_roots, 2);
  std::set<std::string> host_events;
  for (const auto& [id, md] : cpu->event_metadata()) host_events.insert(md.name());
  for (const char* name : {"XlaModule", "ExecuteProgram", "all-reduce.1", "all-reduce-start.6",
                           "all-reduce-done.6", "collective-permute.4"}) {
    EXPECT_TRUE(host_events.count(name)) << name;
  }

  std::set<uint64_t> correlation_ids;
  for (int g = 0; g < 3; ++g) {
    const auto* gpu = FindPlane(*trace.space, "/device:GPU:" + std::to_string(g));
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu->id(), g);  // XProf's process id is the ordinal
    ASSERT_EQ(gpu->lines_size(), 2);
    EXPECT_EQ(gpu->lines(0).name(), "Stream #13(Compute)");
    EXPECT_EQ(gpu->lines(1).name(), "Stream #14(Compute,NCCL)");
    EXPECT_EQ(gpu->lines(0).events_size(), 2 * 5);
    EXPECT_EQ(gpu->lines(1).events_size(), 2 * 6);
    for (const auto& line : gpu->lines()) {
      for (const auto& e : line.events()) {
        const auto stats = Stats(*gpu, e);
        ASSERT_TRUE(stats.count("correlation_id") && stats.count("kernel_details") &&
                    stats.count("hlo_op") && stats.count("hlo_module"));
        EXPECT_TRUE(correlation_ids.insert(stats.at("correlation_id")->uint64_value()).second);
        EXPECT_EQ(stats.at("kernel_details")->value_case(), xspace::XStat::kRefValue);
        EXPECT_EQ(StatStr(*gpu, *stats.at("kernel_details")).rfind("regs:", 0), 0u);
        EXPECT_EQ(StatStr(*gpu, *stats.at("hlo_module")), "jit_train_step");
      }
    }
    const auto& first_nccl = gpu->lines(1).events(0);
    EXPECT_EQ(gpu->event_metadata().at(first_nccl.metadata_id()).name(),
              "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    EXPECT_EQ(StatStr(*gpu, *Stats(*gpu, first_nccl).at("hlo_op")), "all-reduce.1");
  }
  const VirtualClock clock(hosts[1].clock);
  EXPECT_EQ(ProfileStartTime(*trace.space), static_cast<uint64_t>(clock.Apply(options.true_start_ns)));
  EXPECT_EQ(ProfileStopTime(*trace.space),
            static_cast<uint64_t>(clock.Apply(options.true_start_ns + 2 * options.step_ns)));
  // host plane: per step 2 main-thread events + per GPU 1 module + 6 thunks + 1 done.
  EXPECT_EQ(CountEvents(*trace.space), 2 * (2 + 3 * 8) + 3 * 2 * (5 + 6));
}

// One collective kernel: host, its stamps, and its true instants.
struct Kernel {
  std::string host;
  TraceInstant start, end;
  int64_t true_start, true_end;
};

// Collective kernels of every host, keyed by (step, collective index).
std::map<std::pair<int, int>, std::vector<Kernel>> CollectiveKernels(
    const XSpaceFixtureOptions& options) {
  std::map<std::pair<int, int>, std::vector<Kernel>> out;
  const int per_step = static_cast<int>(FixtureCollectives().size());
  for (const auto& host : Hosts(options)) {
    const HostTrace trace = Generate(options, host);
    const VirtualClock clock(host.clock);
    for (const auto& plane : trace.space->planes()) {
      if (plane.name().rfind("/device:GPU:", 0) != 0) continue;
      const auto& line = plane.lines(1);
      for (int i = 0; i < line.events_size(); ++i) {
        Kernel k{host.host, *EventStart(trace.line_base_ns, line, line.events(i)),
                 *EventEnd(trace.line_base_ns, line, line.events(i)), 0, 0};
        k.true_start = clock.Invert(k.start.ns);
        k.true_end = clock.Invert(k.end.ns);
        out[{i / per_step, i % per_step}].push_back(k);
      }
    }
  }
  return out;
}

TEST(XSpaceFixtureTest, CollectivesKeepHappensBeforeInTrueTime) {
  XSpaceFixtureOptions options;
  options.hosts = 4;
  options.gpus_per_host = 2;
  options.steps = 3;
  const int64_t margin = FixtureCollectiveMarginNs(options);
  EXPECT_GT(margin, 100'000);  // 20 ms steps: a ~0.58 ms margin
  const auto kernels = CollectiveKernels(options);
  ASSERT_EQ(kernels.size(), 3u * 6u);
  for (const auto& [key, list] : kernels) {
    ASSERT_EQ(list.size(), 8u);
    int64_t max_start = INT64_MIN, min_start = INT64_MAX, min_end = INT64_MAX;
    for (const auto& k : list) {
      max_start = std::max(max_start, k.true_start);
      min_start = std::min(min_start, k.true_start);
      min_end = std::min(min_end, k.true_end);
    }
    // Starts spread over at most the jitter (+1 ns of inversion rounding),
    // and every end follows every start by the margin.
    EXPECT_LE(max_start - min_start, options.collective_jitter_ns + 1);
    EXPECT_GE(min_end - max_start, margin - 1) << "step " << key.first << " op " << key.second;
  }
}

// Count (step, collective) pairs where a kernel ends, by its stamps, before
// another host's starts.
int StampedViolations(const XSpaceFixtureOptions& options) {
  int violations = 0;
  for (const auto& [key, list] : CollectiveKernels(options)) {
    TraceInstant max_start = list[0].start, min_end = list[0].end;
    for (const auto& k : list) {
      max_start = std::max(max_start, k.start);
      min_end = std::min(min_end, k.end);
    }
    violations += min_end < max_start;
  }
  return violations;
}

TEST(XSpaceFixtureTest, SkewedClocksBreakHappensBeforeAndTrueClocksDoNot) {
  XSpaceFixtureOptions options;
  options.hosts = 4;
  options.steps = 3;
  EXPECT_GT(StampedViolations(options), 0);  // +-50 ms offsets vs a ~0.6 ms margin
  for (int i = 0; i < 4; ++i) {
    options.clocks.push_back({"h" + std::to_string(i), {0, 0.0, options.true_start_ns}, ""});
  }
  EXPECT_EQ(StampedViolations(options), 0);
}

TEST(XSpaceFixtureTest, DeterministicPerSeed) {
  XSpaceFixtureOptions options;
  const auto bytes = [](const XSpaceFixtureOptions& o) {
    std::string out, error;
    EXPECT_TRUE(SerializeXSpace(*Generate(o, Hosts(o)[0]).space, &out, &error)) << error;
    return out;
  };
  const std::string a = bytes(options);
  EXPECT_EQ(bytes(options), a);
  options.seed = 2;
  EXPECT_NE(bytes(options), a);
  EXPECT_NE(Hosts(options)[0].clock.offset_ns, 0);
}

TEST(XSpaceFixtureTest, RelativeAndAbsoluteLinesGiveTheSameInstants) {
  XSpaceFixtureOptions options;
  options.hosts = 1;
  const auto host = Hosts(options)[0];
  std::vector<TraceInstant> instants[2];
  for (const bool absolute : {false, true}) {
    options.absolute_line_timestamps = absolute;
    std::string bytes, error;
    ASSERT_TRUE(SerializeXSpace(*Generate(options, host).space, &bytes, &error)) << error;
    HostTrace read;  // the reader's rule must recognise both forms
    ASSERT_TRUE(ParseXSpace(bytes, &read, &error)) << error;
    EXPECT_EQ(read.line_base_ns, absolute ? 0 : static_cast<int64_t>(*ProfileStartTime(*read.space)));
    for (const auto& plane : read.space->planes()) {
      for (const auto& line : plane.lines()) {
        if (!absolute) {
          EXPECT_LT(line.timestamp_ns(), options.steps * options.step_ns);
        }
        for (const auto& e : line.events()) {
          instants[absolute].push_back(*EventStart(read.line_base_ns, line, e));
        }
      }
    }
  }
  EXPECT_EQ(instants[0], instants[1]);
  EXPECT_FALSE(instants[0].empty());
}

TEST(XSpaceFixtureTest, RunDirectoryAndTruthReadBack) {
  std::string tmpl = (fs::temp_directory_path() / "fixture_run_XXXXXX").string();
  const fs::path root = ::mkdtemp(tmpl.data());
  XSpaceFixtureOptions options;
  options.hosts = 3;
  options.gpus_per_host = 1;
  FixtureRunSummary summary;
  std::string error;
  ASSERT_TRUE(WriteFixtureRun(options, root, "2026_11_22_04_15_26", root / "truth.json", &summary,
                              &error))
      << error;
  EXPECT_EQ(summary.files.size(), 3u);
  ProfileRun run;
  ASSERT_TRUE(FindRun(root, "", &run, &error)) << error;
  ASSERT_EQ(run.hosts.size(), 3u);
  std::vector<FixtureHost> truth;
  ASSERT_TRUE(LoadFixtureTruth(root / "truth.json", &truth, &error)) << error;
  const auto expected = Hosts(options);
  ASSERT_EQ(truth.size(), expected.size());
  int64_t events = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    EXPECT_EQ(truth[i].host, expected[i].host);
    EXPECT_EQ(truth[i].clock.offset_ns, expected[i].clock.offset_ns);
    EXPECT_EQ(truth[i].clock.drift_ppm, expected[i].clock.drift_ppm);
    EXPECT_EQ(truth[i].clock.t0_ns, expected[i].clock.t0_ns);
    HostTrace trace;
    XSpaceReadResult result;
    ASSERT_TRUE(ReadXSpaceFile(run.hosts[i].path, &trace, &error, &result)) << error;
    EXPECT_EQ(trace.host, expected[i].host);
    EXPECT_TRUE(result.warnings.empty());
    EXPECT_EQ(trace.line_base_ns,
              VirtualClock(expected[i].clock).Apply(options.true_start_ns));
    events += CountEvents(*trace.space);
  }
  EXPECT_EQ(events, summary.events);
  // A second run into the same directory is refused, never mixed.
  EXPECT_FALSE(WriteFixtureRun(options, root, "2026_11_22_04_15_26", root / "truth.json",
                               &summary, &error));
  fs::remove_all(root);
}

// A host on the test bed's evolving node clock stamps on the state file's
// REALTIME, whose rate here changes in the middle of the run, and the truth
// file names the file.
TEST(XSpaceFixtureTest, AClockStateFileStampsTheHost) {
  std::string tmpl = (fs::temp_directory_path() / "fixture_state_XXXXXX").string();
  const fs::path root = ::mkdtemp(tmpl.data());
  XSpaceFixtureOptions options;
  options.gpus_per_host = 1;
  const int64_t start = options.true_start_ns;
  ClockTrajectory raw(start - 1'000'000'000, start - 995'000'000);  // 5 ms ahead
  ASSERT_TRUE(raw.ChangeAt(start + options.step_ns, kFinePerNs + kFinePerNs / 10'000));  // +100 ppm
  const std::string state = (root / "node2.clock").string();
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(state, 2, raw, 16, &error)) << error;
  FixtureHost skewed{"node2", {}, state};
  options.clocks = {{"node1", {0, 0.0, start}, ""}, skewed};
  FixtureRunSummary summary;
  ASSERT_TRUE(WriteFixtureRun(options, root / "logs", "2026_12_02_00_00_00", root / "truth.json", &summary, &error))
      << error;
  std::vector<FixtureHost> truth;
  ASSERT_TRUE(LoadFixtureTruth(root / "truth.json", &truth, &error)) << error;
  ASSERT_EQ(truth.size(), 2u);
  EXPECT_EQ(truth[1].clock_state_file, state);
  EXPECT_TRUE(truth[0].clock_state_file.empty());
  HostTrace trace;
  XSpaceReadResult result;
  ASSERT_TRUE(ReadXSpaceFile(summary.files[1], &trace, &error, &result)) << error;
  EXPECT_EQ(trace.line_base_ns, start + 5'000'000);
  // Every event lies where the state file's REALTIME puts its true instant:
  // the last step's events are stamped with the faster rate's extra time.
  NodeClock clock;
  ASSERT_TRUE(OpenFixtureHostClock(skewed, &clock, &error)) << error;
  const int64_t late = start + 2 * options.step_ns;
  EXPECT_EQ(clock.Ingest(late), late + 5'000'000 + options.step_ns / 10'000);

  options.clocks = {{"node3", {}, (root / "absent.clock").string()}};
  EXPECT_FALSE(ResolveFixtureHosts(options, &truth, &error));
  EXPECT_NE(error.find("node3"), std::string::npos) << error;
  fs::remove_all(root);
}

TEST(XSpaceFixtureTest, BadOptionsAreRefused) {
  std::vector<FixtureHost> hosts;
  std::string error;
  const auto refused = [&](const XSpaceFixtureOptions& o) {
    error.clear();
    return !ResolveFixtureHosts(o, &hosts, &error) && !error.empty();
  };
  XSpaceFixtureOptions o;
  o.gpus_per_host = 49;
  EXPECT_TRUE(refused(o));
  o = {};
  o.collective_jitter_ns = o.step_ns;
  EXPECT_TRUE(refused(o));
  o = {};
  o.steps = 0;
  EXPECT_TRUE(refused(o));
  o = {};
  o.clocks = {{"a", {}, ""}, {"a", {}, ""}};
  EXPECT_TRUE(refused(o));
  EXPECT_NE(error.find("twice"), std::string::npos);
  o.clocks = {{"a/b", {}, ""}};
  EXPECT_TRUE(refused(o));
  o = {};
  o.true_start_ns = 5;
  EXPECT_TRUE(refused(o));
  o = {};
  EXPECT_FALSE(refused(o));
  EXPECT_EQ(hosts.size(), 2u);
}

}  // namespace
}  // namespace chronolink::trace
