// A host's recorded clock page mapping (the GPU collector's), read from its
// XSpace and used as that host's correction when no offsets file exists.
#include "trace/correct/recorded_mapping.h"

#include <gtest/gtest.h>

#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

constexpr int64_t kRef = 1'795'320'000'000'000'000;  // host clock, epoch ns

xspace::XSpace SpaceWith(int64_t offset_ns, int64_t drift_ppt, int64_t uncertainty_ns, int64_t growth_ppt) {
  xspace::XSpace space;
  xspace::XPlane* plane = GetOrCreatePlane(&space, kRecordedMappingPlane);
  SetPlaneStatInt64(plane, kRecordedRefStat, kRef);
  SetPlaneStatInt64(plane, kRecordedOffsetStat, offset_ns);
  SetPlaneStatInt64(plane, kRecordedDriftStat, drift_ppt);
  SetPlaneStatInt64(plane, kRecordedUncertaintyStat, uncertainty_ns);
  SetPlaneStatInt64(plane, kRecordedGrowthStat, growth_ppt);
  SetPlaneStatInt64(plane, kRecordedValidUntilStat, kRef + 2'000'000'000);
  SetPlaneStatInt64(plane, kRecordedNodeStat, 3);
  return space;
}

TEST(RecordedMappingTest, MapsByOffsetAndDriftWithAGrowingBound) {
  // cluster - host = 5 ms at ref, drifting 10 ppm; sigma 100 ns + 0.1 ppm.
  const auto m = ReadRecordedMapping(SpaceWith(5'000'000, 10'000'000, 100, 100'000), nullptr);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->node_id, 3u);
  const RecordedMappingClockMap map(*m, "h");
  const auto at_ref = map.Map({kRef, 0});
  ASSERT_TRUE(at_ref);
  EXPECT_EQ(at_ref->cluster, (TraceInstant{kRef + 5'000'000, 0}));
  EXPECT_DOUBLE_EQ(at_ref->uncertainty_ns, 300.0);  // three sigmas
  EXPECT_EQ(at_ref->quality, MapQuality::kSolved);
  // One second earlier: 10 µs less correction, 100 ns more sigma.
  const auto before = map.Map({kRef - 1'000'000'000, 0});
  ASSERT_TRUE(before);
  EXPECT_EQ(before->cluster, (TraceInstant{kRef - 1'000'000'000 + 5'000'000 - 10'000, 0}));
  EXPECT_DOUBLE_EQ(before->uncertainty_ns, 600.0);
  // Past valid_until: stated as extrapolated, with how far.
  const auto late = map.Map({kRef + 3'000'000'000, 0});
  ASSERT_TRUE(late);
  EXPECT_EQ(late->quality, MapQuality::kExtrapolated);
  EXPECT_EQ(late->beyond_span_ns, 1'000'000'000);
}

TEST(RecordedMappingTest, KeepsTheOrderOfInstantsAPicosecondApart) {
  const auto m = ReadRecordedMapping(SpaceWith(-7, -99'000'000, 1, 0), nullptr);
  ASSERT_TRUE(m);
  const RecordedMappingClockMap map(*m, "h");
  TraceInstant prev{};
  for (int i = 0; i < 2000; ++i) {
    const auto t = map.Map({kRef + i / 1000, i % 1000});
    ASSERT_TRUE(t);
    if (i > 0) {
      EXPECT_LE(prev, t->cluster) << i;
    }
    prev = t->cluster;
  }
}

TEST(RecordedMappingTest, ASpaceWithoutAUsableRecordSaysWhy) {
  std::string why;
  xspace::XSpace empty;
  EXPECT_FALSE(ReadRecordedMapping(empty, &why));
  EXPECT_NE(why.find("no collector clock plane"), std::string::npos) << why;
  xspace::XSpace bare;
  GetOrCreatePlane(&bare, kRecordedMappingPlane);  // the collector saw no valid page
  EXPECT_FALSE(ReadRecordedMapping(bare, &why));
  EXPECT_NE(why.find("no clock page mapping"), std::string::npos) << why;
  EXPECT_FALSE(ReadRecordedMapping(SpaceWith(0, 0, -1, 0), &why));
  EXPECT_NE(why.find("not sane"), std::string::npos) << why;
  EXPECT_FALSE(ReadRecordedMapping(SpaceWith(0, 2'000'000'000, 1, 0), &why));  // 2000 ppm
}

}  // namespace
}  // namespace chronolink::trace
