// The collector's record of the clock page mappings it read.
#include "collector/clock/cluster_mapping_series.h"

#include <gtest/gtest.h>

namespace chronolink::collector {
namespace {

ClockMapping At(int64_t ref_ns, int64_t offset_ns, uint32_t node = 1) {
  ClockMapping m;
  m.node_id = node;
  m.valid = true;
  m.local_ref_ns = ref_ns;
  m.offset_ns = offset_ns;
  return m;
}

TEST(ClusterMappingSeries, OneMappingPerInstantWithItsFirstRead) {
  ClusterMappingSeries s;
  s.Add(At(1'000, 5), 3'000);
  s.Add(At(1'000, 6), 3'050);  // the page read again: its last reading, its first read time
  s.Add(At(3'000, 7), 5'000);
  ASSERT_EQ(s.recorded().mappings.size(), 2u);
  EXPECT_EQ(s.recorded().mappings[0].offset_ns, 6);
  EXPECT_EQ(s.recorded().mappings[0].read_ns, 3'000);
  EXPECT_EQ(s.recorded().node_id, 1u);
}

// Full: every other mapping goes, the first and the newest stay, so the
// record still spans the whole run.
TEST(ClusterMappingSeries, AFullSeriesThinsAndKeepsItsEnds) {
  ClusterMappingSeries s(4);
  for (int64_t k = 0; k < 5; ++k) s.Add(At(k * 1'000, k), k * 1'000 + 10);
  const auto& v = s.recorded().mappings;
  ASSERT_EQ(v.size(), 4u);  // 0, 2 and 3 after thinning, then 4
  EXPECT_EQ(v.front().ref_ns, 0);
  EXPECT_EQ(v[1].ref_ns, 2'000);
  EXPECT_EQ(v.back().ref_ns, 4'000);
  EXPECT_EQ(s.thinned(), 1u);
  for (size_t i = 1; i < v.size(); ++i) EXPECT_LT(v[i - 1].ref_ns, v[i].ref_ns);
}

TEST(ClusterMappingSeries, AnotherNodesPageStartsAfresh) {
  ClusterMappingSeries s;
  s.Add(At(1'000, 5, 1), 2'000);
  s.Add(At(3'000, 5, 1), 4'000);
  s.Add(At(5'000, 9, 2), 6'000);
  ASSERT_EQ(s.recorded().mappings.size(), 1u);
  EXPECT_EQ(s.recorded().node_id, 2u);
  EXPECT_EQ(s.discarded(), 2u);
}

}  // namespace
}  // namespace chronolink::collector
