// The ROCm backend on a real AMD GPU (label gpu: excluded from CI, run by
// scripts/test-gpu.sh). Without amdkfd or a device every test skips with the
// backend's own reason. The workload uses the HIP runtime through dlopen
// (hipMalloc, hipMemcpyAsync, hipMemsetAsync on a stream of its own): no
// device code is compiled.
//
// Bounds are loose on purpose; the figures (bracket, map bound, the region's
// anchoring bound and where it lands against the host reads around it) are
// printed for docs/PERFORMANCE.md.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "collector/clock/device_clock_map.h"
#include "collector/device/rocm/rocm_backend.h"

namespace chronolink::collector {
namespace {

constexpr int kHipMemcpyHostToDevice = 1;
constexpr size_t kBytes = 8 << 20;
constexpr int64_t kSlackNs = 1'000'000;

struct HipRuntime {
  int (*SetDevice)(int) = nullptr;
  int (*Malloc)(void**, size_t) = nullptr;
  int (*Free)(void*) = nullptr;
  int (*StreamCreate)(void**) = nullptr;
  int (*StreamDestroy)(void*) = nullptr;
  int (*StreamSynchronize)(void*) = nullptr;
  int (*MemcpyAsync)(void*, const void*, size_t, int, void*) = nullptr;
  int (*MemsetAsync)(void*, int, size_t, void*) = nullptr;

  bool Load(std::string* why) {
    void* h = nullptr;
    for (const char* name : {"libamdhip64.so.5", "libamdhip64.so.6", "libamdhip64.so"}) {
      h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h != nullptr) break;
    }
    if (h == nullptr) {
      *why = "libamdhip64 not found";
      return false;
    }
    SetDevice = reinterpret_cast<int (*)(int)>(dlsym(h, "hipSetDevice"));
    Malloc = reinterpret_cast<int (*)(void**, size_t)>(dlsym(h, "hipMalloc"));
    Free = reinterpret_cast<int (*)(void*)>(dlsym(h, "hipFree"));
    StreamCreate = reinterpret_cast<int (*)(void**)>(dlsym(h, "hipStreamCreate"));
    StreamDestroy = reinterpret_cast<int (*)(void*)>(dlsym(h, "hipStreamDestroy"));
    StreamSynchronize = reinterpret_cast<int (*)(void*)>(dlsym(h, "hipStreamSynchronize"));
    MemcpyAsync =
        reinterpret_cast<int (*)(void*, const void*, size_t, int, void*)>(dlsym(h, "hipMemcpyAsync"));
    MemsetAsync = reinterpret_cast<int (*)(void*, int, size_t, void*)>(dlsym(h, "hipMemsetAsync"));
    if (!SetDevice || !Malloc || !Free || !StreamCreate || !StreamDestroy || !StreamSynchronize ||
        !MemcpyAsync || !MemsetAsync) {
      *why = "libamdhip64 lacks a runtime call";
      return false;
    }
    return true;
  }
};

class RocmGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = CreateRocmBackend();
    std::string why;
    const BackendStatus s = backend_->Open(BackendOptions{}, &devices_, &why);
    if (s != BackendStatus::kReady) {
      GTEST_SKIP() << "no usable AMD GPU here (" << BackendStatusName(s) << "): " << why;
    }
    ASSERT_FALSE(devices_.empty());
  }

  SampleOutcome Sample(uint32_t ordinal) {
    SnapshotReading reads[3];
    size_t got = 0;
    std::string why;
    for (SnapshotReading& r : reads) got += backend_->ReadSnapshot(ordinal, host_, &r, &why) ? 1 : 0;
    EXPECT_EQ(got, 3u) << why;
    return map_.AddSample(std::span<const SnapshotReading>(reads, got));
  }

  NodeClock host_;
  std::unique_ptr<GpuBackend> backend_;
  std::vector<GpuDeviceInfo> devices_;
  DeviceClockMap map_;
};

TEST_F(RocmGpuTest, TwoHundredSnapshotsGiveATightMap) {
  const uint32_t ordinal = devices_[0].ordinal;
  std::printf("figure: device %u: %s, clock: %s\n", ordinal, devices_[0].name.c_str(),
              devices_[0].clock.c_str());
  for (int i = 0; i < 200; ++i) {
    Sample(ordinal);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const DeviceClockMapStats& st = map_.stats();
  EXPECT_GE(st.accepted, 150u);
  const std::vector<DeviceClockKnot> knots = map_.Knots();
  ASSERT_FALSE(knots.empty());
  int64_t worst = 0;
  for (const DeviceClockKnot& k : knots) worst = std::max(worst, k.error_ns);
  const ConvertedStamp mid = map_.ToHost(knots[knots.size() / 2].device_ns);
  ASSERT_TRUE(mid.ok);
  EXPECT_LT(mid.error_ns, 100'000);
  std::printf(
      "figure: snapshots: %llu accepted of %llu, last bracket %lld ns, worst knot bound %lld ns, "
      "mid-span bound %lld ns\n",
      static_cast<unsigned long long>(st.accepted), static_cast<unsigned long long>(st.samples),
      static_cast<long long>(st.last_bracket_ns), static_cast<long long>(worst),
      static_cast<long long>(mid.error_ns));
}

TEST_F(RocmGpuTest, ARegionAroundACopyAndAMemsetComesBackAnchored) {
  const uint32_t ordinal = devices_[0].ordinal;
  HipRuntime rt;
  std::string why;
  if (!rt.Load(&why)) GTEST_SKIP() << why;
  ASSERT_TRUE(backend_->StartActivity(&why)) << why;
  RegionTimer* timer = backend_->region_timer();
  ASSERT_NE(timer, nullptr);
  for (int i = 0; i < 20; ++i) Sample(ordinal);

  ASSERT_EQ(rt.SetDevice(static_cast<int>(ordinal)), 0);
  std::vector<char> host_buf(kBytes, 1);
  void* dev = nullptr;
  void* stream = nullptr;
  ASSERT_EQ(rt.Malloc(&dev, kBytes), 0);
  ASSERT_EQ(rt.StreamCreate(&stream), 0);
  const int64_t h_begin = host_.Now();
  const uint64_t region = timer->Begin(ordinal, stream, "copy and set", &why);
  ASSERT_NE(region, 0u) << why;
  ASSERT_EQ(rt.MemcpyAsync(dev, host_buf.data(), kBytes, kHipMemcpyHostToDevice, stream), 0);
  ASSERT_EQ(rt.MemsetAsync(dev, 0, kBytes, stream), 0);
  ASSERT_TRUE(timer->End(region, &why)) << why;
  ASSERT_EQ(rt.StreamSynchronize(stream), 0);
  const int64_t h_done = host_.Now();

  std::vector<GpuActivity> records;
  for (int i = 0; i < 200 && records.empty(); ++i) {  // at most ~2 s
    Sample(ordinal);
    backend_->DrainActivity(&records);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int i = 0; i < 20; ++i) Sample(ordinal);
  backend_->StopActivity();
  backend_->DrainActivity(&records);
  ASSERT_EQ(rt.StreamDestroy(stream), 0);
  ASSERT_EQ(rt.Free(dev), 0);

  ASSERT_EQ(records.size(), 1u);
  const GpuActivity& a = records[0];
  EXPECT_EQ(a.kind, ActivityKind::kMarker);
  EXPECT_EQ(a.name, "copy and set");
  EXPECT_EQ(a.correlation_id, region);
  EXPECT_LT(a.start_device_ns, a.end_device_ns);
  EXPECT_GT(a.device_error_ns, 0);
  EXPECT_LT(a.device_error_ns, 1'000'000);
  const ConvertedStamp s = map_.ToHost(a.start_device_ns);
  const ConvertedStamp e = map_.ToHost(a.end_device_ns);
  ASSERT_TRUE(s.ok && e.ok);
  EXPECT_GE(s.realtime_ns + s.error_ns + a.device_error_ns + kSlackNs, h_begin);
  EXPECT_LE(e.realtime_ns - e.error_ns - a.device_error_ns - kSlackNs, h_done);
  std::printf(
      "figure: region: starts %+lld ns after Begin, ends %+lld ns before the sync returned, "
      "anchoring bound %lld ns, map bound %lld ns\n",
      static_cast<long long>(s.realtime_ns - h_begin), static_cast<long long>(h_done - e.realtime_ns),
      static_cast<long long>(a.device_error_ns), static_cast<long long>(s.error_ns));
  const ActivityCounters c = backend_->activity_counters();
  EXPECT_EQ(c.invalid, 0u);
}

}  // namespace
}  // namespace chronolink::collector
