// The CUDA backend on a real NVIDIA GPU (label gpu: excluded from CI, run
// by scripts/test-gpu.sh). Without a driver or a device every test skips
// with the backend's own reason. The workload uses libcudart through dlopen
// (cudaMalloc, cudaMemcpy, cudaMemset): no device code is compiled.
//
// Bounds are loose on purpose; the figures (bracket, map bound, where each
// record lands against host reads taken around the synchronous calls) are
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
#include "collector/device/cuda/cuda_backend.h"

namespace chronolink::collector {
namespace {

constexpr int kCudaMemcpyHostToDevice = 1;
constexpr int kCudaMemcpyDeviceToHost = 2;
constexpr size_t kBytes = 8 << 20;
// Loose: CUPTI's own GPU -> CPU interpolation is outside our bound.
constexpr int64_t kSlackNs = 1'000'000;

// The few runtime calls the workload needs, resolved from libcudart.
struct Cudart {
  int (*SetDevice)(int) = nullptr;
  int (*Malloc)(void**, size_t) = nullptr;
  int (*Free)(void*) = nullptr;
  int (*Memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*Memset)(void*, int, size_t) = nullptr;
  int (*DeviceSynchronize)() = nullptr;

  bool Load(std::string* why) {
    void* h = nullptr;
    for (const char* name : {"libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.13", "libcudart.so"}) {
      h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h != nullptr) break;
    }
    if (h == nullptr) {
      *why = "libcudart not found";
      return false;
    }
    SetDevice = reinterpret_cast<int (*)(int)>(dlsym(h, "cudaSetDevice"));
    Malloc = reinterpret_cast<int (*)(void**, size_t)>(dlsym(h, "cudaMalloc"));
    Free = reinterpret_cast<int (*)(void*)>(dlsym(h, "cudaFree"));
    Memcpy = reinterpret_cast<int (*)(void*, const void*, size_t, int)>(dlsym(h, "cudaMemcpy"));
    Memset = reinterpret_cast<int (*)(void*, int, size_t)>(dlsym(h, "cudaMemset"));
    DeviceSynchronize = reinterpret_cast<int (*)()>(dlsym(h, "cudaDeviceSynchronize"));
    if (!SetDevice || !Malloc || !Free || !Memcpy || !Memset || !DeviceSynchronize) {
      *why = "libcudart lacks a runtime call";
      return false;
    }
    return true;
  }
};

class CudaGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = CreateCudaBackend();
    std::string why;
    const BackendStatus s = backend_->Open(BackendOptions{}, &devices_, &why);
    if (s != BackendStatus::kReady) {
      GTEST_SKIP() << "no CUDA device here (" << BackendStatusName(s) << "): " << why;
    }
    ASSERT_FALSE(devices_.empty());
  }

  // One sample of three reads into the map.
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

TEST_F(CudaGpuTest, TwoHundredSnapshotsGiveATightMap) {
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
  EXPECT_LT(mid.error_ns, 50'000);
  std::printf(
      "figure: snapshots: %llu accepted of %llu, last bracket %lld ns, worst knot bound %lld ns, "
      "mid-span bound %lld ns\n",
      static_cast<unsigned long long>(st.accepted), static_cast<unsigned long long>(st.samples),
      static_cast<long long>(st.last_bracket_ns), static_cast<long long>(worst),
      static_cast<long long>(mid.error_ns));
}

TEST_F(CudaGpuTest, CopiesAndMemsetArriveConvertedWithinTheirHostBrackets) {
  const uint32_t ordinal = devices_[0].ordinal;
  Cudart rt;
  std::string why;
  if (!rt.Load(&why)) GTEST_SKIP() << why;
  ASSERT_TRUE(backend_->StartActivity(&why)) << why;

  ASSERT_EQ(rt.SetDevice(static_cast<int>(ordinal)), 0);
  std::vector<char> host_buf(kBytes, 1);
  void* dev = nullptr;
  ASSERT_EQ(rt.Malloc(&dev, kBytes), 0);
  ASSERT_EQ(rt.DeviceSynchronize(), 0);
  // Pairs right before the copies: creating the context above takes a
  // second or more, and a bound grows with the gap between two pairs.
  for (int i = 0; i < 20; ++i) Sample(ordinal);
  int64_t h[4];
  h[0] = host_.Now();
  ASSERT_EQ(rt.Memcpy(dev, host_buf.data(), kBytes, kCudaMemcpyHostToDevice), 0);
  h[1] = host_.Now();
  ASSERT_EQ(rt.Memset(dev, 0, kBytes), 0);
  ASSERT_EQ(rt.DeviceSynchronize(), 0);
  h[2] = host_.Now();
  ASSERT_EQ(rt.Memcpy(host_buf.data(), dev, kBytes, kCudaMemcpyDeviceToHost), 0);
  h[3] = host_.Now();
  ASSERT_EQ(rt.Free(dev), 0);
  for (int i = 0; i < 20; ++i) {
    Sample(ordinal);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  backend_->StopActivity();
  std::vector<GpuActivity> records;
  backend_->DrainActivity(&records);

  const GpuActivity* by_kind[3] = {nullptr, nullptr, nullptr};
  const ActivityKind kinds[3] = {ActivityKind::kMemcpyHtoD, ActivityKind::kMemset, ActivityKind::kMemcpyDtoH};
  for (const GpuActivity& a : records) {
    EXPECT_LE(a.start_device_ns, a.end_device_ns);
    for (int k = 0; k < 3; ++k) {
      if (a.kind == kinds[k] && a.bytes == kBytes && by_kind[k] == nullptr) by_kind[k] = &a;
    }
  }
  for (int k = 0; k < 3; ++k) {
    ASSERT_NE(by_kind[k], nullptr) << "no " << ActivityKindName(kinds[k]) << " record among "
                                   << records.size();
    const ConvertedStamp s = map_.ToHost(by_kind[k]->start_device_ns);
    const ConvertedStamp e = map_.ToHost(by_kind[k]->end_device_ns);
    ASSERT_TRUE(s.ok && e.ok);
    // The operation ran inside the host reads around its synchronous call.
    EXPECT_GE(s.realtime_ns + s.error_ns + kSlackNs, h[k]);
    EXPECT_LE(e.realtime_ns - e.error_ns - kSlackNs, h[k + 1]);
    std::printf(
        "figure: %s: starts %+lld ns after the call began, ends %+lld ns before it returned, bound %lld ns\n",
        std::string(ActivityKindName(kinds[k])).c_str(), static_cast<long long>(s.realtime_ns - h[k]),
        static_cast<long long>(h[k + 1] - e.realtime_ns), static_cast<long long>(s.error_ns));
  }
  EXPECT_LE(by_kind[0]->start_device_ns, by_kind[1]->start_device_ns);
  EXPECT_LE(by_kind[1]->start_device_ns, by_kind[2]->start_device_ns);
  const ActivityCounters c = backend_->activity_counters();
  std::printf("figure: records %llu, dropped %llu, invalid %llu\n",
              static_cast<unsigned long long>(c.records), static_cast<unsigned long long>(c.dropped),
              static_cast<unsigned long long>(c.invalid));
}

}  // namespace
}  // namespace chronolink::collector
