// The collector's lifecycle on the simulated GPU (a test double for a real
// device, which cannot exist here): export with and without Stop, the
// bounded activity store, no device with continue and fail, and the agent's
// clock page absent, valid, stale, not yet valid and torn.
#include "collector/api/collector.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "agent/export/clock_mapping_publisher.h"
#include "clock/clock_reader.h"
#include "clock/clock_state_file.h"
#include "tests/support/ci_rule.h"
#include "trace/correct/recorded_mapping.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::collector {
namespace {

CollectorOptions Simulated(int max_records = 1'000'000) {
  CollectorOptions o;
  o.backend = "simulated";
  o.backend_settings = {"devices=2", "seed=3", "kernel_interval_us=500", "kernel_us=50"};
  o.sample_period_ns = 10'000'000;
  o.max_activity_records = max_records;
  o.host = "simhost";
  return o;
}

int64_t CountDeviceEvents(const xspace::XSpace& space) {
  int64_t n = 0;
  for (const auto& plane : space.planes()) {
    if (plane.name().rfind("/device:GPU:", 0) != 0) continue;
    for (const auto& line : plane.lines()) n += line.events_size();
  }
  return n;
}

void RunFor(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

TEST(CollectorTest, ExportsWithoutStopAndAfterStop) {
  std::string error;
  auto c = Collector::Create(Simulated(), &error);
  ASSERT_TRUE(c) << error;
  ASSERT_TRUE(c->Start(&error)) << error;
  RunFor(std::chrono::milliseconds(300));
  trace::HostTrace live;
  DeviceExportStats stats;
  ASSERT_TRUE(c->ExportTo(&live, &stats, &error)) << error;  // never stopped: still a whole picture
  EXPECT_GT(stats.events_written, 0);
  EXPECT_EQ(CountDeviceEvents(*live.space), stats.events_written);
  EXPECT_TRUE(trace::FindPlane(*live.space, "/device:GPU:0"));
  EXPECT_TRUE(trace::FindPlane(*live.space, "/device:GPU:1"));
  EXPECT_TRUE(trace::FindPlane(*live.space, kGpuClockPlane));
  ASSERT_EQ(live.space->hostnames_size(), 1);
  EXPECT_EQ(live.space->hostnames(0), "simhost");
  c->Stop();
  c->Stop();  // idempotent
  trace::HostTrace done;
  DeviceExportStats after;
  ASSERT_TRUE(c->ExportTo(&done, &after, &error)) << error;
  EXPECT_GE(after.events_written, stats.events_written);
  const CollectorStatus s = c->Status();
  EXPECT_EQ(s.backend, "simulated");
  ASSERT_EQ(s.maps.size(), 2u);
  EXPECT_GT(s.maps[0].accepted, 5u);
  EXPECT_FALSE(s.running);
}

// Test mode's evolving node clock (docs/testbed.md "Clocks as deployed"):
// the host side of every record is on the clock state file's REALTIME, as
// the node's agent stamps, here 50 ms ahead of the true time.
TEST(CollectorTest, AClockStateFileIsTheHostClock) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("collector-clock-" + std::to_string(getpid()) + ".clock")).string();
  std::filesystem::remove(path);
  const int64_t now = ReadClockNs(CLOCK_REALTIME);
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(path, 1, ClockTrajectory(now - 1'000'000'000, now - 950'000'000), 16, &error))
      << error;
  CollectorOptions o = Simulated();
  o.test_mode = true;
  o.virtual_clock_state_file = path;
  auto c = Collector::Create(o, &error);
  ASSERT_TRUE(c) << error;
  ASSERT_TRUE(c->Start(&error)) << error;
  RunFor(std::chrono::milliseconds(300));
  c->Stop();
  int compared = 0;
  for (const GpuActivity& a : c->ActivitySnapshot()) {
    if (a.sim_true_start_ns == 0 || a.launch_host_start_ns == 0) continue;
    // The launch comes before the device's start: some µs natively, some ms
    // under qemu or a loaded machine. The kernel's own clock would put it
    // at or below 0.
    const int64_t ahead = a.launch_host_start_ns - a.sim_true_start_ns;
    EXPECT_GT(ahead, 40'000'000) << a.name;
    EXPECT_LT(ahead, 51'000'000) << a.name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
  std::filesystem::remove(path);

  o.virtual_clock_state_file = path + ".absent";
  EXPECT_FALSE(Collector::Create(o, &error));
  EXPECT_NE(error.find("--virtual-clock-state"), std::string::npos) << error;
}

TEST(CollectorTest, TheActivityStoreIsBounded) {
  std::string error;
  auto c = Collector::Create(Simulated(/*max_records=*/20), &error);
  ASSERT_TRUE(c) << error;
  ASSERT_TRUE(c->Start(&error)) << error;
  RunFor(std::chrono::milliseconds(200));
  c->Stop();
  const CollectorStatus s = c->Status();
  EXPECT_EQ(s.activity_kept, 20u);
  EXPECT_GT(s.activity_dropped_store + s.activity.dropped, 0u);
}

TEST(CollectorTest, NoDeviceContinuesOrFailsAsAsked) {
  // ROCm and CUDA libraries may be installed here, but no GPU is.
  CollectorOptions o;
  o.backend = "auto";
  o.host = "nogpu";
  std::string error;
  auto c = Collector::Create(o, &error);
  ASSERT_TRUE(c) << error;
  const CollectorStatus s = c->Status();
  EXPECT_TRUE(s.devices.empty());
  EXPECT_NE(s.backend_message.find("rocm"), std::string::npos) << s.backend_message;
  EXPECT_NE(s.backend_message.find("cuda"), std::string::npos) << s.backend_message;
  ASSERT_TRUE(c->Start(&error)) << error;
  c->Stop();
  trace::HostTrace t;
  DeviceExportStats stats;
  ASSERT_TRUE(c->ExportTo(&t, &stats, &error)) << error;
  EXPECT_EQ(stats.events_written, 0);
  ASSERT_GT(t.space->warnings_size(), 0);  // the file says why it has no GPU data
  o.fail_without_gpu = true;
  EXPECT_FALSE(Collector::Create(o, &error));
  EXPECT_NE(error.find("no GPU"), std::string::npos) << error;
}

class ClockPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("collector-page-" + std::to_string(getpid()))).string();
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::string StateAfterStart() {
    CollectorOptions o = Simulated();
    o.clock_page = path_;
    std::string error;
    auto c = Collector::Create(o, &error);
    EXPECT_TRUE(c) << error;
    if (!c) return "";
    trace::HostTrace t;
    DeviceExportStats stats;
    EXPECT_TRUE(c->ExportTo(&t, &stats, &error)) << error;  // reads the page
    EXPECT_TRUE(trace::FindPlane(*t.space, kGpuClockPlane));
    const auto m = trace::ReadRecordedMappings(*t.space, nullptr);
    cluster_recorded_ = m.has_value();
    if (m) recorded_ = *m;
    return c->Status().clock_page_state;
  }

  ClockMapping Mapping(int64_t valid_for_ns) {
    ClockMapping m;
    m.node_id = 1;
    m.valid = true;
    // Both clocks at one instant: two plain reads a preemption apart would
    // pass for a step (the check allows 20 µs; under qemu on a loaded
    // machine this test failed so once).
    const NodeClock::WithMonotonic now = NodeClock().NowWithMonotonic();
    m.local_ref_ns = now.node_ns;
    m.offset_ns = 12'345;
    m.uncertainty_ns = 100;
    m.valid_until_ns = m.local_ref_ns + valid_for_ns;
    m.published_local_ns = m.local_ref_ns;
    m.published_monotonic_ns = now.monotonic_ns;
    return m;
  }

  // A collector on this test's page, and the page's writer opened as its agent.
  std::unique_ptr<Collector> CollectorWithAgent(ClockMappingPublisher* agent) {
    std::string error;
    EXPECT_TRUE(agent->Open(path_, 1, &error)) << error;
    CollectorOptions o = Simulated();
    o.clock_page = path_;
    auto c = Collector::Create(o, &error);
    EXPECT_TRUE(c) << error;
    return c;
  }

  std::string path_;
  bool cluster_recorded_ = false;
  trace::RecordedMappings recorded_;
};

TEST_F(ClockPageTest, AbsentPageIsSaidAndNothingRecorded) {
  EXPECT_EQ(StateAfterStart(), "absent");
  EXPECT_FALSE(cluster_recorded_);
}

// The local clock stepped after the agent wrote the page (and before it
// could withdraw it): the reader's own check refuses the mapping.
TEST_F(ClockPageTest, AMappingWrittenBeforeAClockStepIsRefused) {
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path_, 1, &error)) << error;
  ClockMapping m = Mapping(60'000'000'000);
  m.published_local_ns -= 1'000'000;  // as if REALTIME stepped 1 ms forwards since
  pub.Publish(m);
  EXPECT_EQ(StateAfterStart(), "clock stepped");
  EXPECT_FALSE(cluster_recorded_);
}

// A page another local user planted at the path before the agent started
// (the agent then refuses to start on it): with a false mapping 5 s off,
// it once was recorded "ok" and align --recorded-mapping moved every event
// by 5 s. Now it is refused, said in the status, and nothing is recorded;
// naming that user as the agent's (--clock-page-owner) is what trusts it.
TEST_F(ClockPageTest, APagePlantedByAnotherUserIsRefusedAndNotRecorded) {
  if (geteuid() != 0) CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("giving a file to another user needs root");
  {
    ClockMappingPublisher squatter;
    std::string error;
    ASSERT_TRUE(squatter.Open(path_, 1, &error)) << error;
    ClockMapping m = Mapping(60'000'000'000);
    m.offset_ns = 5'000'000'000;
    squatter.Publish(m);
  }
  ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
  EXPECT_EQ(StateAfterStart(), "refused");
  EXPECT_FALSE(cluster_recorded_);

  CollectorOptions o = Simulated();
  o.clock_page = path_;
  std::string error;
  auto c = Collector::Create(o, &error);
  ASSERT_TRUE(c) << error;
  const CollectorStatus s = c->Status();
  EXPECT_NE(s.clock_page_refusal.find("owned by uid 65534"), std::string::npos) << s.clock_page_refusal;
  EXPECT_GE(s.clock_page_refusals, 1u);

  o.clock_page_owner_uid = 65534;
  auto trusting = Collector::Create(o, &error);
  ASSERT_TRUE(trusting) << error;
  EXPECT_EQ(trusting->Status().clock_page_state, "ok");
}

TEST_F(ClockPageTest, ASymlinkToAValidPageIsRefused) {
  const std::string target = path_ + "-target";
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(target, 1, &error)) << error;
  pub.Publish(Mapping(60'000'000'000));
  ASSERT_EQ(symlink(target.c_str(), path_.c_str()), 0);
  EXPECT_EQ(StateAfterStart(), "refused");
  EXPECT_FALSE(cluster_recorded_);
  std::filesystem::remove(target);
}

TEST_F(ClockPageTest, AValidPageIsRecorded) {
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path_, 1, &error)) << error;
  pub.Publish(Mapping(60'000'000'000));
  EXPECT_EQ(StateAfterStart(), "ok");
  ASSERT_TRUE(cluster_recorded_);  // as chronolink-trace align --recorded-mapping reads it
  ASSERT_EQ(recorded_.mappings.size(), 1u);
  EXPECT_EQ(recorded_.mappings[0].offset_ns, 12'345);
  EXPECT_EQ(recorded_.mappings[0].uncertainty_ns, 100);
  EXPECT_EQ(recorded_.node_id, 1u);
}

TEST_F(ClockPageTest, AStalePageIsNotRecorded) {
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path_, 1, &error)) << error;
  pub.Publish(Mapping(-1'000'000'000));  // its agent stopped a second ago
  EXPECT_EQ(StateAfterStart(), "stale");
  EXPECT_FALSE(cluster_recorded_);
}

TEST_F(ClockPageTest, APageWithoutASolutionIsNotRecorded) {
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path_, 1, &error)) << error;  // valid only after the first Publish
  EXPECT_EQ(StateAfterStart(), "invalid");
  EXPECT_FALSE(cluster_recorded_);
}

TEST_F(ClockPageTest, ARestartedAgentsNewPageIsFound) {
  CollectorOptions o = Simulated();
  o.clock_page = path_;
  std::string error;
  auto c = Collector::Create(o, &error);
  ASSERT_TRUE(c) << error;
  trace::HostTrace t;
  DeviceExportStats stats;
  {
    ClockMappingPublisher old_agent;
    ASSERT_TRUE(old_agent.Open(path_, 1, &error)) << error;
    old_agent.Publish(Mapping(-1'000'000'000));  // it stopped
    ASSERT_TRUE(c->ExportTo(&t, &stats, &error)) << error;
    EXPECT_EQ(c->Status().clock_page_state, "stale");
    EXPECT_EQ(c->Status().clock_page_lapses, 0u);  // never "ok": nothing lapsed
  }
  std::filesystem::remove(path_);  // the new agent makes a new file
  ClockMappingPublisher new_agent;
  ASSERT_TRUE(new_agent.Open(path_, 1, &error)) << error;
  new_agent.Publish(Mapping(60'000'000'000));
  trace::HostTrace t2;
  ASSERT_TRUE(c->ExportTo(&t2, &stats, &error)) << error;
  EXPECT_EQ(c->Status().clock_page_state, "ok");
  EXPECT_TRUE(trace::ReadRecordedMappings(*t2.space, nullptr));
}

// A page read "ok" that then goes stale (its agent's solves stopped coming)
// is counted: a running agent's page must never lapse.
TEST_F(ClockPageTest, APageThatLapsesIsCounted) {
  ClockMappingPublisher agent;
  auto c = CollectorWithAgent(&agent);
  ASSERT_TRUE(c);
  agent.Publish(Mapping(60'000'000'000));
  std::string error;
  DeviceExportStats stats;
  const auto state_after_export = [&] {
    trace::HostTrace t;
    EXPECT_TRUE(c->ExportTo(&t, &stats, &error)) << error;
    return c->Status().clock_page_state;
  };
  EXPECT_EQ(state_after_export(), "ok");
  EXPECT_EQ(c->Status().clock_page_lapses, 0u);
  agent.Publish(Mapping(-1'000'000'000));
  EXPECT_EQ(state_after_export(), "stale");
  EXPECT_EQ(state_after_export(), "stale");  // one lapse, however long it lasts
  EXPECT_EQ(c->Status().clock_page_lapses, 1u);
  agent.Publish(Mapping(60'000'000'000));
  EXPECT_EQ(state_after_export(), "ok");
  EXPECT_EQ(c->Status().clock_page_lapses, 1u);
}

// After the stop, the page's mappings still trail it by the solve's lag:
// pending until one covers the stop, then mapped; never when the agent
// stopped too.
TEST_F(ClockPageTest, TheStopIsMappedOnceAMappingCoversIt) {
  ClockMappingPublisher agent;
  auto c = CollectorWithAgent(&agent);
  ASSERT_TRUE(c);
  std::string error;
  ASSERT_TRUE(c->Start(&error)) << error;
  EXPECT_EQ(c->ReadStopMapping().state, Collector::StopMapping::kNever) << "running: no stop to map";
  ClockMapping lagging = Mapping(60'000'000'000);
  lagging.local_ref_ns -= 7'000'000'000;  // the solve's lag
  agent.Publish(lagging);
  c->Stop();
  Collector::StopMapping m = c->ReadStopMapping();
  EXPECT_EQ(m.state, Collector::StopMapping::kPending);
  EXPECT_GE(m.unmapped_ns, 7'000'000'000);
  EXPECT_LT(m.unmapped_ns, 60'000'000'000);
  ClockMapping covering = Mapping(60'000'000'000);
  covering.local_ref_ns = c->stopped_at_ns() + 1;
  agent.Publish(covering);
  EXPECT_EQ(c->ReadStopMapping().state, Collector::StopMapping::kMapped);
  agent.Publish(Mapping(-1'000'000'000));  // the agent stopped: its page goes stale
  EXPECT_EQ(c->ReadStopMapping().state, Collector::StopMapping::kNever);
}

// Every mapping read "ok" is kept for the run's record, one per instant,
// also through a lapse and after its agent stopped: each holds at its own
// instant (align --recorded-mapping interpolates between them).
TEST_F(ClockPageTest, EveryMappingReadOkIsKeptThroughALapse) {
  ClockMappingPublisher agent;
  auto c = CollectorWithAgent(&agent);
  ASSERT_TRUE(c);
  std::string error;
  DeviceExportStats stats;
  const auto recorded_after_export = [&] {
    trace::HostTrace t;
    EXPECT_TRUE(c->ExportTo(&t, &stats, &error)) << error;
    return trace::ReadRecordedMappings(*t.space, nullptr);
  };
  ClockMapping first = Mapping(60'000'000'000);
  agent.Publish(first);
  ASSERT_TRUE(recorded_after_export());
  EXPECT_EQ(recorded_after_export()->mappings.size(), 1u);  // the same instant read again: one
  ClockMapping second = Mapping(60'000'000'000);
  second.local_ref_ns = first.local_ref_ns + 2'000'000'000;
  second.offset_ns = 12'400;
  agent.Publish(second);
  EXPECT_EQ(recorded_after_export()->mappings.size(), 2u);
  agent.Publish(Mapping(-1'000'000'000));  // its agent stopped
  const auto kept = recorded_after_export();
  EXPECT_EQ(c->Status().clock_page_state, "stale");
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->mappings.size(), 2u);  // the stale one is not among them
  EXPECT_EQ(kept->mappings[0].offset_ns, 12'345);
  EXPECT_EQ(kept->mappings[1].offset_ns, 12'400);
  EXPECT_GT(kept->mappings[0].read_ns, 0);
  EXPECT_EQ(c->Status().clock_page_mappings, 2u);
}

TEST_F(ClockPageTest, APageLeftMidUpdateIsNotRecorded) {
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path_, 1, &error)) << error;
  pub.Publish(Mapping(60'000'000'000));
  pub.Close();
  // A writer that died inside its update leaves seq odd forever.
  const int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* p = ::mmap(nullptr, sizeof(ClockMappingPage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* page = static_cast<ClockMappingPage*>(p);
  page->flags.store(kClockPageValid);
  page->seq.store(page->seq.load() | 1);
  EXPECT_EQ(StateAfterStart(), "busy");
  EXPECT_FALSE(cluster_recorded_);
  ::munmap(p, sizeof(ClockMappingPage));
  ::close(fd);
}

}  // namespace
}  // namespace chronolink::collector
