// The backend table: names and the order "auto" tries, lookups, each entry's
// factory, and the not-compiled stand-in that says what the build lacked.
#include "collector/device/backend_registry.h"

#include <gtest/gtest.h>

#include <set>

#include "collector/device/not_compiled_backend.h"

namespace chronolink::collector {
namespace {

TEST(BackendRegistryTest, ListsRocmCudaThenSimulated) {
  const auto backends = Backends();
  ASSERT_EQ(backends.size(), 3u);
  EXPECT_EQ(backends[0].name, "rocm");
  EXPECT_EQ(backends[1].name, "cuda");
  EXPECT_EQ(backends[2].name, "simulated");
  EXPECT_TRUE(backends[2].compiled_in);
  for (const BackendEntry& entry : backends) {
    EXPECT_FALSE(entry.description.empty()) << entry.name;
    ASSERT_NE(entry.create, nullptr) << entry.name;
  }
#ifdef CHRONOLINK_HAVE_ROCM
  EXPECT_TRUE(backends[0].compiled_in);
#else
  EXPECT_FALSE(backends[0].compiled_in);
#endif
#ifdef CHRONOLINK_HAVE_CUDA
  EXPECT_TRUE(backends[1].compiled_in);
#else
  EXPECT_FALSE(backends[1].compiled_in);
#endif
}

TEST(BackendRegistryTest, FindsByExactName) {
  for (std::string_view name : {"rocm", "cuda", "simulated"}) {
    const BackendEntry* entry = FindBackend(name);
    ASSERT_NE(entry, nullptr) << name;
    EXPECT_EQ(entry->name, name);
  }
  EXPECT_EQ(FindBackend("auto"), nullptr);  // a choice among entries, not an entry
  EXPECT_EQ(FindBackend("ROCm"), nullptr);
  EXPECT_EQ(FindBackend(""), nullptr);
  EXPECT_EQ(FindBackend("opencl"), nullptr);
}

// Creating is cheap and loads nothing; each backend answers to its name.
TEST(BackendRegistryTest, EachFactoryMakesTheNamedBackend) {
  for (const BackendEntry& entry : Backends()) {
    auto backend = entry.create();
    ASSERT_NE(backend, nullptr) << entry.name;
    EXPECT_EQ(backend->name(), entry.name);
  }
}

TEST(BackendRegistryTest, AnEntryLeftOutOfTheBuildSaysSoOnOpen) {
  for (const BackendEntry& entry : Backends()) {
    if (entry.compiled_in) continue;
    auto backend = entry.create();
    std::vector<GpuDeviceInfo> devices;
    std::string why;
    EXPECT_EQ(backend->Open({}, &devices, &why), BackendStatus::kNotCompiledIn) << entry.name;
    EXPECT_NE(why.find("not compiled"), std::string::npos) << why;
  }
}

TEST(NotCompiledBackendTest, NamesWhatTheBuildLackedAndIsSafeToUse) {
  auto backend = CreateNotCompiledBackend("rocm", "hsakmt.h (apt-get install libhsakmt-dev)");
  EXPECT_EQ(backend->name(), "rocm");
  std::vector<GpuDeviceInfo> devices(1);
  std::string why;
  EXPECT_EQ(backend->Open({}, &devices, &why), BackendStatus::kNotCompiledIn);
  EXPECT_TRUE(devices.empty());
  EXPECT_NE(why.find("rocm backend is not compiled"), std::string::npos) << why;
  EXPECT_NE(why.find("libhsakmt-dev"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos);  // one line

  SnapshotReading r;
  EXPECT_FALSE(backend->ReadSnapshot(0, NodeClock(), &r, &why));
  EXPECT_FALSE(backend->StartActivity(&why));
  std::vector<GpuActivity> records;
  EXPECT_EQ(backend->DrainActivity(&records), 0u);
  backend->StopActivity();
  EXPECT_EQ(backend->activity_counters().records, 0u);
  EXPECT_EQ(backend->region_timer(), nullptr);
  backend->Close();
}

TEST(BackendNamesTest, EveryStatusAndKindHasItsOwnName) {
  std::set<std::string_view> statuses;
  for (int s = 0; s <= static_cast<int>(BackendStatus::kFailed); ++s) {
    const std::string_view name = BackendStatusName(static_cast<BackendStatus>(s));
    EXPECT_NE(name, "unknown");
    statuses.insert(name);
  }
  EXPECT_EQ(statuses.size(), 5u);
  EXPECT_EQ(BackendStatusName(BackendStatus::kNoDevice), "no_device");
  std::set<std::string_view> kinds;
  for (int k = 0; k <= static_cast<int>(ActivityKind::kMarker); ++k) {
    const std::string_view name = ActivityKindName(static_cast<ActivityKind>(k));
    EXPECT_NE(name, "unknown");
    kinds.insert(name);
  }
  EXPECT_EQ(kinds.size(), 6u);
  EXPECT_EQ(ActivityKindName(ActivityKind::kMemcpyHtoD), "memcpy_htod");
  EXPECT_EQ(BackendStatusName(static_cast<BackendStatus>(99)), "unknown");
}

}  // namespace
}  // namespace chronolink::collector
