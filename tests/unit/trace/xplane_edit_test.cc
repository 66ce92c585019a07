// xplane_edit: planes, lines and metadata by name with ids that collide
// with nothing, typed plane stats, Task Environment times, hostnames.
#include "trace/model/xplane_edit.h"

#include <gtest/gtest.h>

#include <limits>

namespace chronolink::trace {
namespace {

TEST(XPlaneEditTest, PlanesAreFoundOrCreatedWithAFreshId) {
  xspace::XSpace space;
  EXPECT_EQ(NextPlaneId(space), 0);
  EXPECT_EQ(FindPlane(space, "/host:CPU"), nullptr);
  auto* gpu = GetOrCreatePlane(&space, "/device:GPU:0");
  EXPECT_EQ(gpu->id(), 0);
  space.add_planes()->set_id(49);
  auto* env = GetOrCreatePlane(&space, "Task Environment");
  EXPECT_EQ(env->id(), 50);
  EXPECT_EQ(GetOrCreatePlane(&space, "/device:GPU:0")->id(), 0);  // found, not added
  EXPECT_EQ(space.planes_size(), 3);
  EXPECT_EQ(FindPlane(space, "Task Environment"), &space.planes(2));
  EXPECT_EQ(FindMutablePlane(&space, "/device:GPU:0"), &space.planes(0));
}

TEST(XPlaneEditTest, PlaneIdsNeverCollideEvenAtTheTopOfTheRange) {
  xspace::XSpace space;
  space.add_planes()->set_id(std::numeric_limits<int64_t>::max());
  space.add_planes()->set_id(0);
  EXPECT_EQ(NextPlaneId(space), 1);
}

TEST(XPlaneEditTest, LinesAreFoundOrCreated) {
  xspace::XPlane plane;
  auto* a = GetOrCreateLine(&plane, "_counters_");
  EXPECT_EQ(a->id(), 0);
  plane.add_lines()->set_id(41);
  auto* b = GetOrCreateLine(&plane, "chronolink");
  EXPECT_EQ(b->id(), 42);
  EXPECT_EQ(GetOrCreateLine(&plane, "_counters_"), &plane.lines(0));
  EXPECT_EQ(plane.lines_size(), 3);
}

TEST(XPlaneEditTest, MetadataIdsAreFreshAcrossKeysAndIdFields) {
  xspace::XPlane plane;
  (*plane.mutable_stat_metadata())[1].set_name("a");
  auto& odd = (*plane.mutable_stat_metadata())[5];
  odd.set_name("b");
  odd.set_id(9);  // an id field that disagrees with its key: avoided too
  auto* c = GetOrCreateStatMetadata(&plane, "c");
  EXPECT_EQ(c->id(), 10);
  EXPECT_EQ(plane.stat_metadata().at(10).name(), "c");
  EXPECT_EQ(GetOrCreateStatMetadata(&plane, "b"), &plane.mutable_stat_metadata()->at(5));
  EXPECT_EQ(FindStatMetadataId(plane, "b"), 5);
  EXPECT_EQ(FindStatMetadataId(plane, "zzz"), std::nullopt);

  auto* e = GetOrCreateEventMetadata(&plane, "all-reduce.1");
  EXPECT_EQ(e->id(), 1);  // never 0: 0 reads as "unset"
  EXPECT_EQ(GetOrCreateEventMetadata(&plane, "all-reduce.1"), e);
  EXPECT_EQ(FindEventMetadataId(plane, "all-reduce.1"), 1);
}

TEST(XPlaneEditTest, MetadataIdAtTheTopOfTheRangeFallsBackToAFreeOne) {
  xspace::XPlane plane;
  (*plane.mutable_event_metadata())[std::numeric_limits<int64_t>::max()].set_name("x");
  (*plane.mutable_event_metadata())[1].set_name("y");
  EXPECT_EQ(GetOrCreateEventMetadata(&plane, "z")->id(), 2);
}

TEST(XPlaneEditTest, PlaneStatsAreTypedAndReplaceable) {
  xspace::XPlane plane;
  SetPlaneStatUint64(&plane, "u", std::numeric_limits<uint64_t>::max());
  SetPlaneStatInt64(&plane, "i", -5);
  SetPlaneStatDouble(&plane, "d", 0.25);
  SetPlaneStatStr(&plane, "s", "text");
  EXPECT_EQ(GetPlaneStatUint64(plane, "u"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(GetPlaneStatInt64(plane, "i"), -5);
  EXPECT_EQ(GetPlaneStatDouble(plane, "d"), 0.25);
  EXPECT_EQ(GetPlaneStatStr(plane, "s"), "text");
  EXPECT_EQ(GetPlaneStatInt64(plane, "u"), std::nullopt);  // another type
  EXPECT_EQ(GetPlaneStatUint64(plane, "missing"), std::nullopt);
  // Setting again replaces the value (and its type), never adds a second stat.
  SetPlaneStatInt64(&plane, "u", 3);
  EXPECT_EQ(GetPlaneStatUint64(plane, "u"), std::nullopt);
  EXPECT_EQ(GetPlaneStatInt64(plane, "u"), 3);
  EXPECT_EQ(plane.stats_size(), 4);
  EXPECT_EQ(plane.stat_metadata_size(), 4);
}

TEST(XPlaneEditTest, StrStatsResolveRefValues) {
  xspace::XPlane plane;
  const int64_t value_id = GetOrCreateStatMetadata(&plane, "jit_train_step")->id();
  auto* stat = plane.add_stats();
  stat->set_metadata_id(GetOrCreateStatMetadata(&plane, "hlo_module")->id());
  stat->set_ref_value(static_cast<uint64_t>(value_id));
  EXPECT_EQ(GetPlaneStatStr(plane, "hlo_module"), "jit_train_step");
  stat->set_ref_value(999);  // a dangling ref is no value, not a crash
  EXPECT_EQ(GetPlaneStatStr(plane, "hlo_module"), std::nullopt);
}

TEST(XPlaneEditTest, TaskEnvironmentTimes) {
  xspace::XSpace space;
  EXPECT_EQ(ProfileStartTime(space), std::nullopt);
  SetProfileStartTime(&space, 1'795'320'926'000'000'000);
  SetProfileStopTime(&space, 1'795'320'927'000'000'000);
  EXPECT_EQ(space.planes_size(), 1);
  const auto* env = FindPlane(space, kTaskEnvPlaneName);
  ASSERT_NE(env, nullptr);
  EXPECT_EQ(GetPlaneStatUint64(*env, kProfileStartTimeStat), 1'795'320'926'000'000'000u);
  EXPECT_EQ(ProfileStartTime(space), 1'795'320'926'000'000'000u);
  EXPECT_EQ(ProfileStopTime(space), 1'795'320'927'000'000'000u);
  // Some writers store int64: a non-negative one is accepted, a negative not.
  SetPlaneStatInt64(FindMutablePlane(&space, kTaskEnvPlaneName), kProfileStopTimeStat, 77);
  EXPECT_EQ(ProfileStopTime(space), 77u);
  SetPlaneStatInt64(FindMutablePlane(&space, kTaskEnvPlaneName), kProfileStopTimeStat, -1);
  EXPECT_EQ(ProfileStopTime(space), std::nullopt);
}

TEST(XPlaneEditTest, HostnamesAreReplaced) {
  xspace::XSpace space;
  space.add_hostnames("old");
  SetHostnames(&space, {"worker-0", "alias"});
  ASSERT_EQ(space.hostnames_size(), 2);
  EXPECT_EQ(space.hostnames(0), "worker-0");
  EXPECT_EQ(space.hostnames(1), "alias");
}

}  // namespace
}  // namespace chronolink::trace
