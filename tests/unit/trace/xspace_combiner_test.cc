#include "trace/combine/xspace_combiner.h"

#include <gtest/gtest.h>

#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

HostTrace MakeHost(const std::string& name, int64_t base_ns, int gpus) {
  HostTrace h;
  h.host = name;
  h.clock = TraceClock::kClusterTime;
  h.line_base_ns = base_ns;
  SetProfileStartTime(h.space, base_ns);
  SetProfileStopTime(h.space, base_ns + 1'000'000);
  xspace::XPlane* cpu = GetOrCreatePlane(h.space, "/host:CPU");
  GetOrCreateLine(cpu, "python")->set_timestamp_ns(100);
  for (int g = 0; g < gpus; ++g) {
    xspace::XPlane* gpu = GetOrCreatePlane(h.space, "/device:GPU:" + std::to_string(g));
    gpu->set_id(g);
    GetOrCreateLine(gpu, "Stream #7(Kernel)")->set_timestamp_ns(200);
  }
  h.space->add_warnings("dropped 3 events");
  SetHostnames(h.space, {name});
  return h;
}

TEST(XSpaceCombinerTest, PlanesAreRenamedAndRenumberedPerHostSoNothingCollides) {
  const int64_t base = 1'795'320'000'000'000'000;
  HostTrace a = MakeHost("a", base, 2), b = MakeHost("b", base + 5'000, 2);
  HostTrace out;
  std::string error;
  ASSERT_TRUE(CombineXSpace({&a, &b}, "job", &out, &error)) << error;
  EXPECT_EQ(out.host, "job");
  ASSERT_EQ(out.space->hostnames_size(), 2);
  EXPECT_EQ(out.space->hostnames(1), "b");
  for (int g = 0; g < 4; ++g) {
    const xspace::XPlane* gpu = FindPlane(*out.space, "/device:GPU:" + std::to_string(g));
    ASSERT_NE(gpu, nullptr) << g;
    EXPECT_EQ(gpu->id(), g);  // XProf takes the process id from the plane id
    EXPECT_EQ(GetPlaneStatStr(*gpu, "host"), g < 2 ? "a" : "b");
  }
  const xspace::XPlane* cpu_b = FindPlane(*out.space, "/host:CPU (b)");
  ASSERT_NE(cpu_b, nullptr);
  EXPECT_NE(FindPlane(*out.space, "/host:CPU (a)")->id(), cpu_b->id());
  // b's lines move onto the combined base (a's, the earlier): +5 µs.
  EXPECT_EQ(out.line_base_ns, base);
  EXPECT_EQ(cpu_b->lines(0).timestamp_ns(), 100 + 5'000);
  EXPECT_EQ(FindPlane(*out.space, "/device:GPU:2")->lines(0).timestamp_ns(), 200 + 5'000);
  // One Task Environment spanning both.
  int task_envs = 0;
  for (const auto& p : out.space->planes()) task_envs += p.name() == kTaskEnvPlaneName;
  EXPECT_EQ(task_envs, 1);
  EXPECT_EQ(ProfileStartTime(*out.space), static_cast<uint64_t>(base));
  EXPECT_EQ(ProfileStopTime(*out.space), static_cast<uint64_t>(base + 5'000 + 1'000'000));
  ASSERT_EQ(out.space->warnings_size(), 2);
  EXPECT_EQ(out.space->warnings(1), "b: dropped 3 events");
  // The inputs are untouched.
  EXPECT_EQ(FindPlane(*b.space, "/host:CPU")->lines(0).timestamp_ns(), 100);
}

TEST(XSpaceCombinerTest, HostsOnDifferentClocksAreRefused) {
  HostTrace a = MakeHost("a", 1, 1), b = MakeHost("b", 1, 1);
  b.clock = TraceClock::kHostRealtime;
  HostTrace out;
  std::string error;
  EXPECT_FALSE(CombineXSpace({&a, &b}, "job", &out, &error));
  EXPECT_NE(error.find("align before combining"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink::trace
