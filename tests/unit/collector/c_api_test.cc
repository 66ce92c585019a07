// The C API (include/chronolink/collector.h) through the shared library, on
// the simulated GPU (a test double for a real device): the whole lifecycle,
// appending to a profiler's XSpace, regions, status, and every error path
// returning an error instead of crashing.
#include "include/chronolink/collector.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "proto/xplane.pb.h"

namespace {

constexpr const char* kSimulated =
    R"({"backend": "simulated", "backend_settings": "devices=1,kernel_interval_us=500",
        "sample_period_ms": 10, "host": "capi"})";

TEST(CApiTest, LifecycleAppendsToTheProfilersSpace) {
  char err[256] = "";
  chronolink_collector* c = chronolink_collector_create(kSimulated, err, sizeof err);
  ASSERT_NE(c, nullptr) << err;
  ASSERT_EQ(chronolink_collector_start(c, err, sizeof err), 1) << err;
  const uint64_t region = chronolink_collector_region_begin(c, 0, nullptr, "my_region", err, sizeof err);
  ASSERT_NE(region, 0u) << err;
  ASSERT_EQ(chronolink_collector_region_end(c, region, err, sizeof err), 1) << err;
  EXPECT_EQ(chronolink_collector_region_end(c, region, err, sizeof err), 0);  // ended twice
  EXPECT_NE(std::string(err), "");

  // The host profiler's own space: one plane of its own.
  xspace::XSpace host;
  host.add_planes()->set_name("/host:CPU");
  const std::string in = host.SerializeAsString();
  void* out = nullptr;
  size_t out_len = 0;
  ASSERT_EQ(chronolink_collector_export_xspace(c, in.data(), in.size(), &out, &out_len, err, sizeof err), 1) << err;
  xspace::XSpace merged;
  ASSERT_TRUE(merged.ParseFromArray(out, static_cast<int>(out_len)));
  chronolink_collector_free(out);
  bool cpu = false, gpu = false;
  for (const auto& p : merged.planes()) {
    cpu |= p.name() == "/host:CPU";
    gpu |= p.name() == "/device:GPU:0";
  }
  EXPECT_TRUE(cpu);
  EXPECT_TRUE(gpu);

  char* status = chronolink_collector_status_json(c);
  ASSERT_NE(status, nullptr);
  const auto j = nlohmann::json::parse(status);
  chronolink_collector_free(status);
  EXPECT_EQ(j["backend"], "simulated");
  EXPECT_EQ(j["running"], true);

  chronolink_collector_stop(c);
  const auto dir = std::filesystem::temp_directory_path() / ("capi-" + std::to_string(getpid()));
  ASSERT_EQ(chronolink_collector_write_run(c, dir.c_str(), "run1", err, sizeof err), 1) << err;
  EXPECT_TRUE(std::filesystem::exists(dir / "plugins/profile/run1/capi.xplane.pb"));
  std::filesystem::remove_all(dir);
  chronolink_collector_destroy(c);
}

TEST(CApiTest, ErrorsAreReturnedNotThrown) {
  char err[64] = "";
  EXPECT_EQ(chronolink_collector_create("{not json", err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("JSON"), std::string::npos) << err;
  EXPECT_EQ(chronolink_collector_create(R"({"reads_per_sample": 0})", err, sizeof err), nullptr);
  EXPECT_EQ(chronolink_collector_create(R"({"backend": "simulated"})", nullptr, 0) != nullptr, true);
  // A tiny buffer is truncated, still terminated.
  char tiny[8];
  EXPECT_EQ(chronolink_collector_create(R"({"backend": "nope"})", tiny, sizeof tiny), nullptr);
  EXPECT_EQ(std::string(tiny).size(), 7u);
  EXPECT_EQ(chronolink_collector_start(nullptr, err, sizeof err), 0);
  chronolink_collector_stop(nullptr);
  chronolink_collector_destroy(nullptr);
  EXPECT_EQ(chronolink_collector_status_json(nullptr), nullptr);

  chronolink_collector* c = chronolink_collector_create(kSimulated, err, sizeof err);
  ASSERT_NE(c, nullptr) << err;
  void* out = nullptr;
  size_t out_len = 0;
  const char garbage[] = "\xff\xff\xff\xff not a protobuf";
  EXPECT_EQ(chronolink_collector_export_xspace(c, garbage, sizeof garbage, &out, &out_len, err, sizeof err), 0);
  EXPECT_EQ(chronolink_collector_export_xspace(c, nullptr, 5, &out, &out_len, err, sizeof err), 0);
  EXPECT_EQ(chronolink_collector_export_xspace(c, nullptr, 0, nullptr, &out_len, err, sizeof err), 0);
  EXPECT_EQ(chronolink_collector_region_begin(c, 7, nullptr, "no such device", err, sizeof err), 0u);
  EXPECT_EQ(chronolink_collector_write_run(c, nullptr, "r", err, sizeof err), 0);
  chronolink_collector_destroy(c);
}

}  // namespace
