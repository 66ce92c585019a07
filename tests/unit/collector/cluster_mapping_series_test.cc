// The collector's record of the clock page mappings it read.
#include "collector/clock/cluster_mapping_series.h"

#include <gtest/gtest.h>

namespace chronolink::collector {
namespace {

// A solution's mapping: each has its own staleness instant.
ClockMapping At(int64_t ref_ns, int64_t offset_ns, uint32_t node = 1) {
  ClockMapping m;
  m.node_id = node;
  m.valid = true;
  m.local_ref_ns = ref_ns;
  m.offset_ns = offset_ns;
  m.valid_until_ns = ref_ns + 10'000'000'000;
  return m;
}

// Between solutions the agent republishes every 100 ms: a republication on
// the same line adds nothing; one the daemon bent is kept.
TEST(ClusterMappingSeries, ARepublicationOnTheSameLineIsNotKept) {
  ClusterMappingSeries s;
  ClockMapping solved = At(1'000'000'000, 5'000);
  solved.drift_ppt = 45'000'000;  // 45 ppm
  s.Add(solved, 1'000'000'000);
  ClockMapping same = solved;
  same.local_ref_ns += 100'000'000;
  same.offset_ns = solved.ToCluster(same.local_ref_ns) - same.local_ref_ns;
  s.Add(same, 1'100'000'000);
  EXPECT_EQ(s.recorded().mappings.size(), 1u) << "on the line";
  ClockMapping bent = same;
  bent.local_ref_ns += 100'000'000;
  bent.offset_ns = solved.ToCluster(bent.local_ref_ns) - bent.local_ref_ns - 40;  // the daemon moved it 40 ns
  s.Add(bent, 1'200'000'000);
  ClockMapping new_rate = same;
  new_rate.local_ref_ns = bent.local_ref_ns + 100'000'000;
  new_rate.offset_ns = bent.ToCluster(new_rate.local_ref_ns) - new_rate.local_ref_ns;
  new_rate.drift_ppt = 46'000'000;
  s.Add(new_rate, 1'300'000'000);
  ClockMapping next_solution = At(new_rate.local_ref_ns + 100'000'000, 0);
  next_solution.offset_ns = new_rate.ToCluster(next_solution.local_ref_ns) - next_solution.local_ref_ns;
  next_solution.drift_ppt = new_rate.drift_ppt;
  s.Add(next_solution, 1'400'000'000);
  ASSERT_EQ(s.recorded().mappings.size(), 4u) << "bent, a new rate and a new solution are kept";
  EXPECT_EQ(s.recorded().mappings[1].ref_ns, bent.local_ref_ns);
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
