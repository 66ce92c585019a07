// The simulated GPU backend (the test double for a real GPU, which cannot
// exist here): settings and their errors, snapshots that bracket the true
// read, a counter that wraps (unwrapped) or steps back (refused, with the
// reason), activity records that are sane against their truth, the bounded
// pending buffer, region timing, and every call safe in any state.
#include "collector/device/simulated/simulated_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>

#include "clock/clock_reader.h"
#include "collector/device/simulated/simulated_settings.h"

namespace chronolink::collector {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

struct Opened {
  std::unique_ptr<GpuBackend> backend = CreateSimulatedBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  BackendStatus status = BackendStatus::kFailed;
};

std::unique_ptr<Opened> Open(std::vector<std::string> settings, const NodeClock* host = nullptr,
                             size_t max_pending = 1 << 20) {
  auto o = std::make_unique<Opened>();
  BackendOptions options;
  options.settings = std::move(settings);
  options.host_clock = host;
  options.max_pending_activity = max_pending;
  o->status = o->backend->Open(options, &o->devices, &o->why);
  return o;
}

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// --- settings ---------------------------------------------------------------

TEST(SimulatedSettingsTest, DefaultsDifferPerDeviceAndReplayFromTheSeed) {
  SimulatedSettings a;
  SimulatedSettings b;
  SimulatedSettings other;
  std::string error;
  const std::vector<std::string> three = {"devices=3", "seed=9"};
  ASSERT_TRUE(ParseSimulatedSettings(three, &a, &error)) << error;
  ASSERT_TRUE(ParseSimulatedSettings(three, &b, &error)) << error;
  ASSERT_TRUE(ParseSimulatedSettings(std::vector<std::string>{"devices=3", "seed=10"}, &other, &error));
  ASSERT_EQ(a.device.size(), 3u);
  EXPECT_NE(a.device[0].clock.rate_hz, a.device[1].clock.rate_hz);
  EXPECT_NE(a.device[0].clock.rate_error_ppm, a.device[1].clock.rate_error_ppm);
  EXPECT_EQ(a.device[2].clock.rate_error_ppm, b.device[2].clock.rate_error_ppm);
  EXPECT_NE(a.device[2].clock.rate_error_ppm, other.device[2].clock.rate_error_ppm);
  for (const auto& d : a.device) {
    EXPECT_LE(std::abs(d.clock.rate_error_ppm), 30.0);
    EXPECT_EQ(d.clock.bits, 48);
  }
}

TEST(SimulatedSettingsTest, APerDeviceValueWinsOverTheAllDevicesOne) {
  SimulatedSettings s;
  std::string error;
  ASSERT_TRUE(ParseSimulatedSettings(
      std::vector<std::string>{"rate_error_ppm=5", "rate_error_ppm.1=-20", "rate_hz=50000000", "streams=3",
                               "kernel_us=70", "kernel_interval_us=900", "backwards_at_s.0=2.5"},
      &s, &error))
      << error;
  EXPECT_EQ(s.devices, 2u);
  EXPECT_EQ(s.device[0].clock.rate_error_ppm, 5.0);
  EXPECT_EQ(s.device[1].clock.rate_error_ppm, -20.0);
  EXPECT_EQ(s.device[1].clock.rate_hz, 50'000'000u);
  EXPECT_EQ(s.workload.streams, 3u);
  EXPECT_EQ(s.workload.kernel_ns, 70'000);
  EXPECT_EQ(s.workload.kernel_interval_ns, 900'000);
  const SimulatedClockParams p0 = ClockParamsFromOpen(s.device[0], 5 * kSecond);
  const SimulatedClockParams p1 = ClockParamsFromOpen(s.device[1], 5 * kSecond);
  EXPECT_EQ(p0.backwards_at_true_ns, 7'500'000'000);
  EXPECT_EQ(p0.backwards_by_ticks, 50'000u);  // default 1 ms at 50 MHz
  EXPECT_EQ(p1.backwards_at_true_ns, 0);
  EXPECT_EQ(p0.origin_true_ns, 5 * kSecond);
}

TEST(SimulatedSettingsTest, EachBadSettingIsNamed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"colour=blue"}, "unknown key"},
      {{"rate_hz"}, "not key=value"},
      {{"rate_hz=fast"}, "not an integer"},
      {{"rate_hz=100MHz"}, "not an integer"},
      {{"jitter_ns=-5"}, "not an integer"},
      {{"bits=4"}, "in [8, 64]"},
      {{"slow_read_prob=1.5"}, "not a number in [0, 1]"},
      {{"rate_error_ppm=nan"}, "not a number"},
      {{"rate_hz.x=1000000"}, "not a device ordinal"},
      {{"rate_hz.5=1000000"}, "no such device"},
      {{"seed.1=4"}, "for all devices"},
      {{"bits=16"}, "wraps every"},
      {{"bits=32", "wrap_in_s=100"}, "not below the wrap period"},
  };
  for (const auto& [settings, expected] : cases) {
    SimulatedSettings s;
    std::string error;
    EXPECT_FALSE(ParseSimulatedSettings(settings, &s, &error)) << settings.back();
    EXPECT_NE(error.find(expected), std::string::npos) << settings.back() << " -> " << error;
  }
}

TEST(SimulatedBackendTest, BadSettingsFailOpenWithTheReason) {
  auto o = Open({"devices=2", "drift=3"});
  EXPECT_EQ(o->status, BackendStatus::kFailed);
  EXPECT_NE(o->why.find("drift=3"), std::string::npos) << o->why;
  EXPECT_TRUE(o->devices.empty());
  EXPECT_EQ(o->backend->region_timer(), nullptr);
}

TEST(SimulatedBackendTest, NoDeviceIsSaid) {
  auto none = Open({"devices=0"});
  EXPECT_EQ(none->status, BackendStatus::kNoDevice);
  EXPECT_NE(none->why.find("devices=0"), std::string::npos) << none->why;

  auto o = std::make_unique<Opened>();
  BackendOptions options;
  options.devices = {7};
  EXPECT_EQ(o->backend->Open(options, &o->devices, &o->why), BackendStatus::kNoDevice);
  EXPECT_NE(o->why.find("no simulated device 7"), std::string::npos) << o->why;
}

// --- devices and snapshots --------------------------------------------------

TEST(SimulatedBackendTest, OpensItsDevicesAndASubset) {
  auto o = Open({"devices=3"});
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  ASSERT_EQ(o->devices.size(), 3u);
  EXPECT_EQ(o->backend->name(), "simulated");
  EXPECT_EQ(o->devices[1].ordinal, 1u);
  EXPECT_EQ(o->devices[1].name, "simulated GPU 1");
  EXPECT_EQ(o->devices[1].vendor, "simulated");
  EXPECT_EQ(o->devices[0].counter_hz, 100'000'000u);
  EXPECT_EQ(o->devices[1].counter_hz, 25'000'000u);
  EXPECT_EQ(o->devices[0].counter_bits, 48);
  EXPECT_NE(o->devices[0].clock.find("Hz nominal"), std::string::npos);
  std::vector<GpuDeviceInfo> again;
  std::string why;
  EXPECT_EQ(o->backend->Open({}, &again, &why), BackendStatus::kFailed);  // already open

  auto subset = std::make_unique<Opened>();
  BackendOptions options;
  options.settings = {"devices=3"};
  options.devices = {2, 2};
  ASSERT_EQ(subset->backend->Open(options, &subset->devices, &subset->why), BackendStatus::kReady);
  ASSERT_EQ(subset->devices.size(), 1u);
  EXPECT_EQ(subset->devices[0].ordinal, 2u);
  SnapshotReading r;
  EXPECT_FALSE(subset->backend->ReadSnapshot(0, NodeClock(), &r, &why));
  EXPECT_TRUE(subset->backend->ReadSnapshot(2, NodeClock(), &r, &why)) << why;
}

// Readings follow the host clock at the device's rate, within what the
// brackets and a few ppm allow.
TEST(SimulatedBackendTest, SnapshotsBracketTheDeviceReadAndFollowItsRate) {
  auto o =
      Open({"devices=1", "rate_error_ppm=40", "drift_ppm_per_s=0", "jitter_ns=2000", "slow_read_prob=0"});
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  const NodeClock host;
  std::vector<SnapshotReading> reads;
  std::string why;
  for (int i = 0; i < 40; ++i) {
    SnapshotReading r;
    ASSERT_TRUE(o->backend->ReadSnapshot(0, host, &r, &why)) << why;
    EXPECT_GE(r.width_ns(), 300);  // the model's latency is inside the bracket
    reads.push_back(r);
    Sleep(5);
  }
  for (size_t i = 1; i < reads.size(); ++i) EXPECT_GT(reads[i].device_ns, reads[i - 1].device_ns);
  const SnapshotReading& a = reads.front();
  const SnapshotReading& b = reads.back();
  // Device elapsed = host elapsed * (1 + 40 ppm), give or take both brackets.
  const double host_elapsed = static_cast<double>(b.host_before_ns - a.host_after_ns);
  const double slack = static_cast<double>(a.width_ns() + b.width_ns());
  const double device_elapsed = static_cast<double>(b.device_ns - a.device_ns);
  EXPECT_GE(device_elapsed, host_elapsed * (1 + 40e-6) - 1000);
  EXPECT_LE(device_elapsed, (host_elapsed + slack) * (1 + 40e-6) + 1000);
}

TEST(SimulatedBackendTest, SlowReadsWidenTheBracket) {
  auto o = Open({"devices=1", "slow_read_prob=1", "slow_read_ns=300000"});
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  SnapshotReading r;
  std::string why;
  ASSERT_TRUE(o->backend->ReadSnapshot(0, NodeClock(), &r, &why)) << why;
  EXPECT_GE(r.width_ns(), 300'000);
}

TEST(SimulatedBackendTest, ACounterThatWrapsIsUnwrapped) {
  // 32 bits at 100 MHz wrap every 42.9 s; start 0.2 s before a wrap.
  auto o = Open({"devices=1", "bits=32", "rate_hz=100000000", "wrap_in_s=0.2", "slow_read_prob=0"});
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  const NodeClock host;
  std::string why;
  SnapshotReading first;
  SnapshotReading last;
  ASSERT_TRUE(o->backend->ReadSnapshot(0, host, &first, &why)) << why;
  const int64_t wrap_ns = (int64_t{1} << 32) * 10;  // the wrap, in device ns
  EXPECT_LT(first.device_ns, wrap_ns);
  SnapshotReading previous = first;
  for (int i = 0; i < 40 && last.device_ns < wrap_ns + 50'000'000; ++i) {
    Sleep(10);
    ASSERT_TRUE(o->backend->ReadSnapshot(0, host, &last, &why)) << why;
    EXPECT_GT(last.device_ns, previous.device_ns);
    previous = last;
  }
  EXPECT_GT(last.device_ns, wrap_ns);  // unwrapped past 2^32 ticks
  // No jump of a wrap: the device's elapsed time lies between the inner
  // and the outer span of the two brackets, give or take its rate error.
  const double device_elapsed = static_cast<double>(last.device_ns - first.device_ns);
  const double inner = static_cast<double>(last.host_before_ns - first.host_after_ns);
  const double outer = static_cast<double>(last.host_after_ns - first.host_before_ns);
  EXPECT_GE(device_elapsed, inner * (1 - 1e-4) - 1000);
  EXPECT_LE(device_elapsed, outer * (1 + 1e-4) + 1000);
}

TEST(SimulatedBackendTest, ACounterThatStepsBackIsRefusedWithTheReason) {
  // One second back, 0.2 s after Open: reads fail for about a second.
  auto o = Open({"devices=1", "backwards_at_s=0.2", "backwards_by_us=1000000", "slow_read_prob=0"});
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  const NodeClock host;
  SnapshotReading before;
  std::string why;
  ASSERT_TRUE(o->backend->ReadSnapshot(0, host, &before, &why)) << why;
  const int64_t deadline = ReadClockNs(CLOCK_MONOTONIC) + 5 * kSecond;
  std::string refused;
  SnapshotReading r;
  while (refused.empty() && ReadClockNs(CLOCK_MONOTONIC) < deadline) {
    if (o->backend->ReadSnapshot(0, host, &r, &refused)) {
      before = r;
      refused.clear();
    }
    Sleep(10);
  }
  ASSERT_FALSE(refused.empty()) << "the step was never seen";
  EXPECT_NE(refused.find("simulated GPU 0"), std::string::npos) << refused;
  // Once the counter is past its old value again, reads resume; the
  // device has lost about a second against the host.
  SnapshotReading after;
  bool resumed = false;
  while (!resumed && ReadClockNs(CLOCK_MONOTONIC) < deadline) {
    Sleep(20);
    resumed = o->backend->ReadSnapshot(0, host, &after, &why);
  }
  ASSERT_TRUE(resumed) << why;
  const int64_t lost = (after.host_before_ns - before.host_after_ns) - (after.device_ns - before.device_ns);
  EXPECT_GT(lost, 900'000'000);
  EXPECT_LT(lost, 1'100'000'000);
}

// --- activity ---------------------------------------------------------------

TEST(SimulatedBackendTest, ActivityRecordsAreSaneAgainstTheirTruth) {
  // A skewed host clock (the test bed's virtual clock): launch stamps are on it.
  const NodeClock host(
      VirtualClockParams{.offset_ns = 5 * kSecond, .drift_ppm = 100, .t0_ns = ReadClockNs(CLOCK_REALTIME)});
  auto o = Open({"devices=2", "seed=5", "kernel_interval_us=1000", "kernel_us=100", "streams=2",
                 "rate_error_ppm.1=-25", "slow_read_prob=0"},
                &host);
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  std::string why;
  ASSERT_TRUE(o->backend->StartActivity(&why)) << why;
  ASSERT_TRUE(o->backend->StartActivity(&why)) << why;  // already running: fine
  Sleep(300);
  o->backend->StopActivity();
  std::vector<GpuActivity> records;
  const size_t n = o->backend->DrainActivity(&records);
  ASSERT_EQ(n, records.size());
  ASSERT_GT(n, 10u);
  const ActivityCounters counters = o->backend->activity_counters();
  EXPECT_EQ(counters.records, n);
  EXPECT_EQ(counters.invalid, 0u);

  std::set<uint64_t> correlation_ids;
  std::set<ActivityKind> kinds;
  std::map<uint32_t, std::pair<int64_t, int64_t>> device_minus_true;  // min, max per device
  for (const GpuActivity& a : records) {
    EXPECT_LT(a.device, 2u);
    EXPECT_LT(a.stream, 2u);
    EXPECT_GT(a.end_device_ns, a.start_device_ns);
    EXPECT_GT(a.sim_true_end_ns, a.sim_true_start_ns);
    EXPECT_TRUE(correlation_ids.insert(a.correlation_id).second) << a.correlation_id;
    kinds.insert(a.kind);
    EXPECT_FALSE(a.name.empty());
    if (a.kind == ActivityKind::kKernel) {
      EXPECT_NE(a.details.find("grid:"), std::string::npos);
    } else {
      EXPECT_GT(a.bytes, 0u);
    }
    // Launched on the host clock before the device started it.
    EXPECT_LE(a.launch_host_start_ns, a.launch_host_end_ns);
    EXPECT_LT(a.launch_host_end_ns, host.Ingest(a.sim_true_start_ns));
    EXPECT_NEAR(static_cast<double>(a.launch_host_end_ns - host.Ingest(a.sim_true_start_ns)), 0, 0.2e9);
    EXPECT_NE(a.launch_thread, 0u);
    // Device durations are true durations at the device's rate (ppm), to a few ticks.
    const double true_duration = static_cast<double>(a.sim_true_end_ns - a.sim_true_start_ns);
    EXPECT_NEAR(static_cast<double>(a.end_device_ns - a.start_device_ns), true_duration,
                1e-4 * true_duration + 200);
    auto& [lo, hi] = device_minus_true.try_emplace(a.device, INT64_MAX, INT64_MIN).first->second;
    lo = std::min(lo, a.start_device_ns - a.sim_true_start_ns);
    hi = std::max(hi, a.start_device_ns - a.sim_true_start_ns);
  }
  EXPECT_TRUE(kinds.count(ActivityKind::kKernel));
  EXPECT_TRUE(kinds.count(ActivityKind::kMemcpyHtoD));
  EXPECT_TRUE(kinds.count(ActivityKind::kMemcpyDtoH));
  // One device clock per device: device - true moves by ppm over the run only.
  ASSERT_EQ(device_minus_true.size(), 2u);
  for (const auto& [device, range] : device_minus_true) {
    EXPECT_LT(range.second - range.first, 1'000'000) << "device " << device;
  }
  EXPECT_EQ(o->backend->DrainActivity(&records), 0u);  // drained
}

TEST(SimulatedBackendTest, PendingRecordsAreBoundedAndTheRestCounted) {
  auto o = Open({"devices=2", "kernel_interval_us=200", "kernel_us=20"}, nullptr, /*max_pending=*/5);
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  std::string why;
  ASSERT_TRUE(o->backend->StartActivity(&why)) << why;
  Sleep(200);
  o->backend->StopActivity();
  std::vector<GpuActivity> records;
  EXPECT_EQ(o->backend->DrainActivity(&records), 5u);
  EXPECT_GT(o->backend->activity_counters().dropped, 0u);
}

TEST(SimulatedBackendTest, RegionsComeBackAsMarkers) {
  auto o = Open({"devices=2", "slow_read_prob=0"});
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  RegionTimer* timer = o->backend->region_timer();
  ASSERT_NE(timer, nullptr);
  std::string why;
  const uint64_t region = timer->Begin(1, reinterpret_cast<void*>(3), "step 1", &why);
  ASSERT_GT(region, 0u) << why;
  Sleep(5);
  ASSERT_TRUE(timer->End(region, &why)) << why;
  EXPECT_FALSE(timer->End(region, &why));  // ended already
  EXPECT_NE(why.find("not open"), std::string::npos) << why;
  EXPECT_EQ(timer->Begin(5, nullptr, "x", &why), 0u);
  EXPECT_NE(why.find("no open simulated device 5"), std::string::npos) << why;
  EXPECT_EQ(timer->Begin(0, reinterpret_cast<void*>(5000), "x", &why), 0u);

  std::vector<GpuActivity> records;
  ASSERT_EQ(o->backend->DrainActivity(&records), 1u);
  const GpuActivity& m = records.front();
  EXPECT_EQ(m.kind, ActivityKind::kMarker);
  EXPECT_EQ(m.device, 1u);
  EXPECT_EQ(m.stream, 3u);
  EXPECT_EQ(m.name, "step 1");
  EXPECT_GT(m.correlation_id, kRegionCorrelationBase);
  EXPECT_GE(m.end_device_ns - m.start_device_ns, 4'000'000);  // about the 5 ms slept
  EXPECT_GE(m.sim_true_end_ns - m.sim_true_start_ns, 5'000'000);
  EXPECT_EQ(m.launch_host_start_ns, m.sim_true_start_ns);  // no host clock given: real REALTIME
}

TEST(SimulatedBackendTest, EveryCallIsSafeInAnyState) {
  auto backend = CreateSimulatedBackend();
  std::string why;
  SnapshotReading r;
  std::vector<GpuActivity> records;
  EXPECT_FALSE(backend->ReadSnapshot(0, NodeClock(), &r, &why));
  EXPECT_FALSE(backend->StartActivity(&why));
  EXPECT_EQ(backend->DrainActivity(&records), 0u);
  backend->StopActivity();
  backend->Close();
  EXPECT_EQ(backend->region_timer(), nullptr);

  auto o = Open({"devices=1", "kernel_interval_us=100", "kernel_us=10"});
  ASSERT_EQ(o->status, BackendStatus::kReady) << o->why;
  ASSERT_TRUE(o->backend->StartActivity(&why)) << why;
  Sleep(20);
  o->backend->Close();  // stops the workload itself
  o->backend->StopActivity();
  EXPECT_FALSE(o->backend->ReadSnapshot(0, NodeClock(), &r, &why));
  o->backend->DrainActivity(&records);  // what was delivered before Close
  // Open again after Close: a fresh start.
  std::vector<GpuDeviceInfo> devices;
  EXPECT_EQ(o->backend->Open({}, &devices, &why), BackendStatus::kReady) << why;
  EXPECT_EQ(o->backend->activity_counters().records, 0u);
}

}  // namespace
}  // namespace chronolink::collector
