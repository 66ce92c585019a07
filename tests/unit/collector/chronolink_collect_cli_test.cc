// chronolink-collect as a user runs it: the real binary on the simulated GPU
// (a test double for a device) and on this machine's missing GPUs, its exit
// codes, its one-line messages, and what it leaves on disk.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/export/clock_mapping_publisher.h"
#include "clock/clock_reader.h"
#include "tests/support/run_process.h"
#include "trace/correct/recorded_mapping.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/host_span.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::collector {
namespace {

namespace fs = std::filesystem;
using chronolink::testing::ProcessResult;
using chronolink::testing::RunProcess;

class CollectCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("chronolink-collect-cli-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ProcessResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), CHRONOLINK_COLLECT_BIN);
    return RunProcess(args, {}, std::chrono::seconds(60));
  }
  std::vector<std::string> Simulated(std::vector<std::string> more) {
    std::vector<std::string> a = {"run", "--backend", "simulated", "--backend-settings", "devices=1",
                                  "--sample-period-ms", "20", "--host", "simhost"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  static int DevicePlanes(const fs::path& file) {
    trace::HostTrace t;
    std::string error;
    EXPECT_TRUE(trace::ReadXSpaceFile(file, &t, &error)) << error;
    int n = 0;
    for (const auto& p : t.space->planes()) n += p.name().rfind("/device:GPU:", 0) == 0;
    return n;
  }

  fs::path dir_;
};

TEST_F(CollectCliTest, EverySubcommandHasHelp) {
  for (const char* sub : {"devices", "run", "import-rocprof", "host-clocks"}) {
    const ProcessResult r = Run({sub, "--help"});
    EXPECT_EQ(r.exit_code, 0) << sub << ": " << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub;
  }
  const ProcessResult r = Run({"run", "--sample-period-ms", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--sample-period-ms"), std::string::npos) << r.err;
}

TEST_F(CollectCliTest, RunWritesARunDirectoryAndSaysWhatItDid) {
  const ProcessResult r = Run(Simulated({"--duration-s", "1", "--logdir", dir_.string(), "--run", "r1",
                                         "--status-json", (dir_ / "status.json").string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("backend simulated, 1 device"), std::string::npos) << r.out;
  const fs::path file = dir_ / "plugins/profile/r1/simhost.xplane.pb";
  ASSERT_TRUE(fs::exists(file));
  EXPECT_EQ(DevicePlanes(file), 1);
  std::ifstream in(dir_ / "status.json");
  const nlohmann::json status = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(status.is_discarded());
  EXPECT_EQ(status["backend"], "simulated");
  EXPECT_EQ(status["running"], false);
  // The summary's figures: what the export wrote, and its bound.
  EXPECT_GT(status["export"]["events_written"].get<int64_t>(), 0) << status.dump();
  EXPECT_GT(status["export"]["max_bound_ns"].get<int64_t>(), 0) << status.dump();

  const ProcessResult bad = Run(Simulated({"--duration-s", "0.2", "--logdir", dir_.string(), "--run", "r2",
                                           "--status-json", (dir_ / "no/such/dir/status.json").string()}));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("cannot write --status-json"), std::string::npos) << bad.err;
}

// An agent's clock page as the leader's solve lag leaves it: every 100 ms a
// mapping for the instant `lag_ns` ago (a page writer standing in for the
// agent, which this unit test does not start).
class LaggingPage {
 public:
  LaggingPage(const fs::path& path, int64_t lag_ns) : lag_ns_(lag_ns) {
    std::string error;
    EXPECT_TRUE(pub_.Open(path.string(), 1, &error)) << error;
    Publish();
    writer_ = std::thread([this] {
      while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        Publish();
      }
    });
  }
  ~LaggingPage() {
    stop_ = true;
    writer_.join();
  }

 private:
  void Publish() {
    ClockMapping m;
    m.node_id = 1;
    m.valid = true;
    // Both clocks at one instant (plain reads a preemption apart pass for a step).
    const NodeClock::WithMonotonic read_at = NodeClock().NowWithMonotonic();
    const int64_t now = read_at.node_ns;
    m.local_ref_ns = now - lag_ns_;
    m.offset_ns = 12'345;
    m.uncertainty_ns = 100;
    m.valid_until_ns = now + 60'000'000'000;
    m.published_local_ns = now;
    m.published_monotonic_ns = read_at.monotonic_ns;
    pub_.Publish(m);
  }
  ClockMappingPublisher pub_;
  int64_t lag_ns_;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

// The page trails the run by the solve's lag: after the stop, run waits
// until a mapping maps the stop, so the run's last instants are recorded.
TEST_F(CollectCliTest, RunWaitsForTheClockPageToMapItsStop) {
  const fs::path page = dir_ / "page";
  LaggingPage agent(page, 1'000'000'000);
  const ProcessResult r = Run(Simulated({"--duration-s", "1", "--out", (dir_ / "run.xplane.pb").string(),
                                         "--clock-page", page.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("the run's end is mapped"), std::string::npos) << r.out << r.err;
  trace::HostTrace t;
  std::string error;
  ASSERT_TRUE(trace::ReadXSpaceFile(dir_ / "run.xplane.pb", &t, &error)) << error;
  const auto stop = trace::ProfileStopTime(*t.space);
  const auto mappings = trace::ReadRecordedMappings(*t.space, &error);
  ASSERT_TRUE(stop.has_value());
  ASSERT_TRUE(mappings.has_value()) << error;
  EXPECT_GE(mappings->mappings.back().ref_ns, static_cast<int64_t>(*stop)) << "the stop is interpolated";
  EXPECT_GT(mappings->mappings.back().read_ns, static_cast<int64_t>(*stop)) << "read after the stop";
  // The wait does not lengthen the profile: nothing in the file lies past its
  // stop, so an aligned profile ends where the run did.
  trace::HostSpanInstants span;
  ASSERT_TRUE(trace::HostSpan(t, &span, &error)) << error;
  EXPECT_EQ(span.last, (trace::TraceInstant{static_cast<int64_t>(*stop), 0}));
}

TEST_F(CollectCliTest, RunWaitsNoLongerThanAskedForAPageThatNeverMapsItsStop) {
  const fs::path page = dir_ / "page";
  LaggingPage agent(page, 600'000'000'000);  // ten minutes behind
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = Run(Simulated({"--duration-s", "0.5", "--out", (dir_ / "run.xplane.pb").string(),
                                         "--clock-page", page.string(), "--page-wait-s", "1"}));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("have no mapping"), std::string::npos) << r.out << r.err;
  EXPECT_LT(took, 30) << "bounded by --page-wait-s, not by the page";
  const ProcessResult no_wait = Run(Simulated({"--duration-s", "0.3", "--out", (dir_ / "run2.xplane.pb").string(),
                                               "--clock-page", page.string(), "--page-wait-s", "0"}));
  ASSERT_EQ(no_wait.exit_code, 0) << no_wait.err;
  EXPECT_EQ((no_wait.out + no_wait.err).find("waiting up to"), std::string::npos) << no_wait.err;
}

TEST_F(CollectCliTest, NoDeviceFailsOrContinuesAsAsked) {
  // No NVIDIA driver and no AMD GPU on these machines.
  ProcessResult r = Run({"run", "--backend", "cuda", "--no-device", "fail", "--duration-s", "0.1",
                         "--logdir", dir_.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no GPU to collect from"), std::string::npos) << r.err;
  r = Run({"run", "--backend", "rocm", "--duration-s", "0.1", "--logdir", dir_.string(), "--run", "r"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no GPU data"), std::string::npos) << r.out;
  r = Run({"devices"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;  // no real GPU: scripts can tell
  EXPECT_NE(r.out.find("simulated"), std::string::npos) << r.out;
}

TEST_F(CollectCliTest, AroundACommandItsExitCodeIsOurs) {
  ProcessResult r = Run(Simulated({"--logdir", dir_.string(), "--run", "c", "--", "sh", "-c", "sleep 0.3; exit 7"}));
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "plugins/profile/c/simhost.xplane.pb"));
  r = Run(Simulated({"--logdir", dir_.string(), "--run", "d", "--", "/nonexistent/program"}));
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("cannot run"), std::string::npos) << r.err;
}

TEST_F(CollectCliTest, AppendingCheckpointsKeepTheProfilersPlanesAndAddOursOnce) {
  trace::HostTrace host;
  host.host = "simhost";
  trace::GetOrCreatePlane(host.space, "/host:CPU");
  const fs::path file = dir_ / "simhost.xplane.pb";
  std::string error;
  ASSERT_TRUE(trace::WriteXSpaceFile(host, file, &error)) << error;
  // Checkpoints every 0.3 s rewrite the file in place; each must start from
  // the profiler's own planes, not from the previous checkpoint.
  const ProcessResult r = Run(Simulated({"--duration-s", "1.2", "--checkpoint-s", "0.3", "--append-to",
                                         file.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(DevicePlanes(file), 1);
  trace::HostTrace back;
  ASSERT_TRUE(trace::ReadXSpaceFile(file, &back, &error)) << error;
  EXPECT_TRUE(trace::FindPlane(*back.space, "/host:CPU"));
  EXPECT_EQ(r.err.find("checkpoint failed"), std::string::npos) << r.err;
}

TEST_F(CollectCliTest, BadInputFilesAreClearErrors) {
  const fs::path junk = dir_ / "junk.xplane.pb";
  std::ofstream(junk) << "this is not protobuf \xff\xff\xff";
  ProcessResult r = Run(Simulated({"--duration-s", "0.1", "--append-to", junk.string()}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.err.empty());
  const fs::path config = dir_ / "c.json";
  std::ofstream(config) << R"({"reads_per_sample": "many"})";
  r = Run({"run", "--config", config.string(), "--duration-s", "0.1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("reads_per_sample"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace chronolink::collector
