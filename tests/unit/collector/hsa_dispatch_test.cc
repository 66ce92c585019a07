// HSA dispatch timing on ROCm without a GPU: the BOOTTIME -> GPU counter
// map (rocm/boot_device_map.h) against synthetic pairs on known lines, and
// the dispatch clock (rocm/hsa_api.h) against a test double of the HSA
// runtime (FakeHsa, below: a system clock at a chosen frequency and
// offset from BOOTTIME, and canned dispatch times). The backend path needs
// an AMD GPU (rocm_gpu_test); here the backends that do not offer it say so.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "collector/api/collector.h"
#include "collector/device/rocm/boot_device_map.h"
#include "collector/device/rocm/hsa_api.h"

namespace chronolink::collector {
namespace {

// The device counter runs 50 ppm fast against BOOTTIME, from an offset.
constexpr int64_t kBoot0 = 7'000'000'000'000;
constexpr int64_t kDevice0 = 123'456'789;
int64_t TrueDevice(int64_t boot) { return kDevice0 + (boot - kBoot0) + (boot - kBoot0) / 20'000; }

BootDeviceMap MapWithPairsEvery(int64_t period_ns, int count, int64_t error_ns) {
  BootDeviceMap map;
  for (int i = 0; i < count; ++i) {
    const int64_t boot = kBoot0 + i * period_ns;
    EXPECT_TRUE(map.Add({boot, TrueDevice(boot), error_ns}));
  }
  return map;
}

TEST(BootDeviceMapTest, InterpolatesBetweenPairsWithinItsBound) {
  const BootDeviceMap map = MapWithPairsEvery(100'000'000, 11, 800);
  std::string why;
  for (int64_t boot = kBoot0; boot <= kBoot0 + 1'000'000'000; boot += 7'777'777) {
    int64_t device = 0, error = 0;
    ASSERT_TRUE(map.ToDevice(boot, &device, &error, &why)) << why;
    EXPECT_LE(std::abs(device - TrueDevice(boot)), 1) << boot;  // linear truth: exact to rounding
    EXPECT_GE(error, 800);
    EXPECT_LE(error, 800 + 5'000 + 1);  // 100 ppm of at most 50 ms to the nearer pair
  }
  int64_t device = 0, error = 0;
  ASSERT_TRUE(map.ToDevice(kBoot0 + 300'000'000, &device, &error, &why));
  EXPECT_EQ(error, 800);  // on a pair: its own error only
}

TEST(BootDeviceMapTest, ExtrapolatesALittleAndRefusesFarOrWithoutPairs) {
  BootDeviceMap empty;
  int64_t device = 0, error = 0;
  std::string why;
  EXPECT_FALSE(empty.ToDevice(kBoot0, &device, &error, &why));
  EXPECT_NE(why.find("no GPU counter"), std::string::npos) << why;

  const BootDeviceMap map = MapWithPairsEvery(100'000'000, 3, 500);
  const int64_t last = kBoot0 + 200'000'000;
  ASSERT_TRUE(map.ToDevice(last + 40'000'000, &device, &error, &why)) << why;
  EXPECT_LE(std::abs(device - TrueDevice(last + 40'000'000)), 1);
  EXPECT_EQ(error, 500 + 4'000);  // 100 ppm of 40 ms
  ASSERT_TRUE(map.ToDevice(kBoot0 - 10'000'000, &device, &error, &why)) << why;
  EXPECT_LE(std::abs(device - TrueDevice(kBoot0 - 10'000'000)), 1);
  EXPECT_FALSE(map.ToDevice(last + 2'000'000'000, &device, &error, &why));
  EXPECT_NE(why.find("after the last"), std::string::npos) << why;
}

TEST(BootDeviceMapTest, PairsOutOfOrderAreSkippedAndTheOldestDropped) {
  BootDeviceMap map({.max_pairs = 3});
  EXPECT_TRUE(map.Add({100, 1000, 1}));
  EXPECT_FALSE(map.Add({100, 2000, 1}));  // same boot time
  EXPECT_FALSE(map.Add({200, 900, 1}));   // device went back
  EXPECT_TRUE(map.Add({200, 1100, 1}));
  EXPECT_TRUE(map.Add({300, 1200, 1}));
  EXPECT_TRUE(map.Add({400, 1300, 1}));
  EXPECT_EQ(map.size(), 3u);
}

// A test double of the HSA runtime: its system clock is BOOTTIME (or, when
// `offset_ns` is set, not), counted at `hz`.
struct FakeHsa {
  static inline uint64_t hz = 100'000'000;
  static inline int64_t offset_ns = 0;
  static inline int64_t boot_now = 5'000'000'000'000;
  static inline hsa_status_t dispatch_status = HSA_STATUS_SUCCESS;
  static inline hsa_amd_profiling_dispatch_time_t dispatch{};

  static uint64_t Ticks(int64_t ns) { return static_cast<uint64_t>((ns + offset_ns) / (1'000'000'000 / static_cast<int64_t>(hz))); }
  static hsa_status_t SystemGetInfo(hsa_system_info_t what, void* value) {
    if (what == HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY) *static_cast<uint64_t*>(value) = hz;
    else if (what == HSA_SYSTEM_INFO_TIMESTAMP) *static_cast<uint64_t*>(value) = Ticks(boot_now);
    else return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    return HSA_STATUS_SUCCESS;
  }
  static hsa_status_t GetDispatchTime(hsa_agent_t, hsa_signal_t, hsa_amd_profiling_dispatch_time_t* t) {
    *t = dispatch;
    return dispatch_status;
  }
  static hsa_status_t StatusString(hsa_status_t, const char** text) {
    *text = "HSA_STATUS_ERROR_INVALID_SIGNAL: a fake's words";
    return HSA_STATUS_SUCCESS;
  }
  static void Fill(HsaApi* api) {
    api->SystemGetInfo = SystemGetInfo;
    api->GetDispatchTime = GetDispatchTime;
    api->StatusString = StatusString;
  }
};

class HsaDispatchClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeHsa::hz = 100'000'000;
    FakeHsa::offset_ns = 0;
    FakeHsa::dispatch_status = HSA_STATUS_SUCCESS;
    FakeHsa::Fill(&api_);
  }
  HsaDispatchClock Clock() {
    return HsaDispatchClock(api_, [] { return FakeHsa::boot_now; });
  }
  HsaApi api_;
};

TEST_F(HsaDispatchClockTest, TicksAtTheRuntimesFrequencyBecomeBootTimeNs) {
  HsaDispatchClock clock = Clock();
  FakeHsa::dispatch = {FakeHsa::Ticks(FakeHsa::boot_now - 2'000'000), FakeHsa::Ticks(FakeHsa::boot_now - 1'500'000)};
  int64_t start = 0, end = 0;
  std::string why;
  ASSERT_TRUE(clock.DispatchTime(1, 2, &start, &end, &why)) << why;
  EXPECT_EQ(start, FakeHsa::boot_now - 2'000'000);
  EXPECT_EQ(end, FakeHsa::boot_now - 1'500'000);
}

TEST_F(HsaDispatchClockTest, ARuntimeWhoseClockIsNotBootTimeIsRefusedOnce) {
  FakeHsa::offset_ns = 3'000'000'000;  // e.g. CLOCK_MONOTONIC on a machine that slept
  HsaDispatchClock clock = Clock();
  int64_t start = 0, end = 0;
  std::string why;
  EXPECT_FALSE(clock.DispatchTime(1, 2, &start, &end, &why));
  EXPECT_NE(why.find("not CLOCK_BOOTTIME"), std::string::npos) << why;
  FakeHsa::offset_ns = 0;  // the verdict stands: checked once
  why.clear();
  EXPECT_FALSE(clock.DispatchTime(1, 2, &start, &end, &why));
  EXPECT_NE(why.find("not CLOCK_BOOTTIME"), std::string::npos) << why;
}

TEST_F(HsaDispatchClockTest, RuntimeFailuresAndBackwardsTimesSayWhy) {
  HsaDispatchClock clock = Clock();
  int64_t start = 0, end = 0;
  std::string why;
  FakeHsa::dispatch_status = HSA_STATUS_ERROR_INVALID_SIGNAL;
  EXPECT_FALSE(clock.DispatchTime(1, 2, &start, &end, &why));
  EXPECT_NE(why.find("a fake's words"), std::string::npos) << why;
  EXPECT_NE(why.find("profiling enabled"), std::string::npos) << why;
  FakeHsa::dispatch_status = HSA_STATUS_SUCCESS;
  FakeHsa::dispatch = {2000, 1000};
  EXPECT_FALSE(clock.DispatchTime(1, 2, &start, &end, &why));
  EXPECT_NE(why.find("before start"), std::string::npos) << why;
}

TEST(HsaDispatchBackendsTest, BackendsWithoutHsaSaySo) {
  CollectorOptions o;
  o.backend = "simulated";
  std::string error;
  auto c = Collector::Create(o, &error);
  ASSERT_NE(c, nullptr) << error;
  HsaDispatch d;
  d.name = "k";
  EXPECT_FALSE(c->TimeHsaDispatch(d, &error));
  EXPECT_NE(error.find("simulated backend does not time HSA dispatches"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink::collector
