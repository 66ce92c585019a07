// The C API (include/chronolink/collector.h) through the shared library, on
// the simulated GPU (a test double for a real device): the whole lifecycle,
// appending to a profiler's XSpace, regions, status, and every error path
// returning an error instead of crashing. It links only the shared library
// (as an embedding application would), so the XSpace bytes are built and
// inspected by hand here: a second copy of proto/xplane.proto's generated
// code in the same process would be a duplicate registration.
#include "include/chronolink/collector.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>


namespace {

// A serialized XSpace with one plane named `name`: XSpace.planes (1) holding
// XPlane.name (2), both length-delimited and shorter than 128 bytes here.
std::string SpaceWithPlane(const std::string& name) {
  std::string plane = "\x12" + std::string(1, static_cast<char>(name.size())) + name;
  return "\x0a" + std::string(1, static_cast<char>(plane.size())) + plane;
}

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
  const std::string in = SpaceWithPlane("/host:CPU");
  void* out = nullptr;
  size_t out_len = 0;
  ASSERT_EQ(chronolink_collector_export_xspace(c, in.data(), in.size(), &out, &out_len, err, sizeof err), 1) << err;
  const std::string merged(static_cast<const char*>(out), out_len);
  chronolink_collector_free(out);
  EXPECT_GT(merged.size(), in.size());
  EXPECT_NE(merged.find("/host:CPU"), std::string::npos);  // the profiler's plane kept
  EXPECT_NE(merged.find("/device:GPU:0"), std::string::npos);

  char* status = chronolink_collector_status_json(c);
  ASSERT_NE(status, nullptr);
  const auto j = nlohmann::json::parse(status);
  chronolink_collector_free(status);
  EXPECT_EQ(j["backend"], "simulated");
  EXPECT_EQ(j["running"], true);

  EXPECT_EQ(chronolink_collector_stop_mapped(c), -1) << "not stopped";
  chronolink_collector_stop(c);
  EXPECT_EQ(chronolink_collector_stop_mapped(c), -1) << "no clock page: no mapping will come";
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
  chronolink_collector* no_err_buffer = chronolink_collector_create(R"({"backend": "simulated"})", nullptr, 0);
  EXPECT_NE(no_err_buffer, nullptr);  // a null error buffer is allowed
  chronolink_collector_destroy(no_err_buffer);
  // A tiny buffer is truncated, still terminated.
  char tiny[8];
  EXPECT_EQ(chronolink_collector_create(R"({"backend": "nope"})", tiny, sizeof tiny), nullptr);
  EXPECT_EQ(std::string(tiny).size(), 7u);
  EXPECT_EQ(chronolink_collector_start(nullptr, err, sizeof err), 0);
  chronolink_collector_stop(nullptr);
  chronolink_collector_destroy(nullptr);
  EXPECT_EQ(chronolink_collector_status_json(nullptr), nullptr);
  EXPECT_EQ(chronolink_collector_stop_mapped(nullptr), -1);

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
  char long_err[160] = "";
  EXPECT_EQ(chronolink_collector_hsa_dispatch(c, 0, 1, 2, 0, "k", long_err, sizeof long_err), 0);
  EXPECT_NE(std::string(long_err).find("does not time HSA dispatches"), std::string::npos) << long_err;
  EXPECT_EQ(chronolink_collector_hsa_dispatch(c, 0, 1, 2, 0, nullptr, err, sizeof err), 0);
  chronolink_collector_destroy(c);
}

}  // namespace
