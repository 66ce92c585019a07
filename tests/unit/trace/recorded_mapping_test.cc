// A host's recorded clock page mappings (the GPU collector's), read from its
// XSpace and made into that host's correction when no offsets file exists.
#include "trace/correct/recorded_mapping.h"

#include <gtest/gtest.h>

#include <cmath>

#include "trace/correct/node_clock_map.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

constexpr int64_t kRef = 1'795'320'000'000'000'000;  // host clock, epoch ns
constexpr int64_t kSecond = 1'000'000'000;

// A host clock against the cluster's: host = cluster + c + r·(cluster − kRef)
// + q·(cluster − kRef)² (a drift that changes, as a warming oscillator's).
struct TrueHostClock {
  double c_ns = 3'000'000, r = 20e-6, q_per_s = 0.005e-6;  // drift moves 0.01 ppm per second
  double HostMinusCluster(double since_ref_ns) const {
    return c_ns + r * since_ref_ns + q_per_s * since_ref_ns * since_ref_ns / 1e9;
  }
  double Drift(double since_ref_ns) const { return r + 2 * q_per_s * since_ref_ns / 1e9; }
  // The cluster instant of a host reading (Newton on the smooth truth).
  double ClusterAt(int64_t host_ns) const {
    double t = static_cast<double>(host_ns - kRef);
    for (int i = 0; i < 4; ++i) t = static_cast<double>(host_ns - kRef) - HostMinusCluster(t);
    return t;  // relative to kRef
  }
  // What the agent's page shows for the instant T = kRef + since_ref_ns:
  // ref on the host clock, cluster − host there and its drift per host ns.
  RecordedMapping PageAt(double since_ref_ns, int64_t sigma_ns) const {
    const double o = HostMinusCluster(since_ref_ns);
    const double d = Drift(since_ref_ns);  // d(host − cluster)/d(cluster)
    RecordedMapping m;
    m.ref_ns = kRef + std::llround(since_ref_ns + o);
    m.offset_ns = -std::llround(o);
    m.drift_ppt = std::llround(-d / (1 + d) * 1e12);  // d(cluster − host)/d(host)
    m.uncertainty_ns = sigma_ns;
    m.growth_ppt = 100'000;
    m.valid_until_ns = m.ref_ns + 17 * kSecond;
    return m;
  }
};

void SetPlaneStats(xspace::XPlane* plane, const RecordedMapping& m) {
  for (const auto& [name, value] : RecordedMappingStats(m)) SetPlaneStatInt64(plane, name, value);
}

// A space as collectors write it: every mapping on the line (in the order
// given), the last also as plane stats.
xspace::XSpace SpaceWith(const std::vector<RecordedMapping>& mappings, uint32_t node = 3) {
  xspace::XSpace space;
  xspace::XPlane* plane = GetOrCreatePlane(&space, kRecordedMappingPlane);
  SetPlaneStatInt64(plane, kRecordedNodeStat, node);
  if (mappings.empty()) return space;
  SetPlaneStats(plane, mappings.back());
  xspace::XLine* line = GetOrCreateLine(plane, kRecordedMappingLine);
  const int64_t event_id = GetOrCreateEventMetadata(plane, kRecordedMappingEvent)->id();
  auto add = [&](xspace::XEvent* e, const char* name, int64_t v) {
    xspace::XStat* s = e->add_stats();
    s->set_metadata_id(GetOrCreateStatMetadata(plane, name)->id());
    s->set_int64_value(v);
  };
  for (const RecordedMapping& m : mappings) {
    xspace::XEvent* e = line->add_events();
    e->set_metadata_id(event_id);
    for (const auto& [name, value] : RecordedMappingStats(m)) add(e, name, value);
  }
  return space;
}

std::unique_ptr<HostClockMap> MapOf(const xspace::XSpace& space, std::shared_ptr<ClusterCorrection>* keep) {
  std::string why;
  const auto recorded = ReadRecordedMappings(space, &why);
  EXPECT_TRUE(recorded) << why;
  if (!recorded) return nullptr;
  *keep = std::make_shared<ClusterCorrection>();
  EXPECT_TRUE(RecordedCorrection(*recorded, "node3.xplane.pb", keep->get(), &why)) << why;
  const NodeCorrection* node = (*keep)->Node(recorded->node_id);
  EXPECT_NE(node, nullptr);
  return node ? MakeNodeClockMap(*keep, node) : nullptr;
}

// Every mapping of a 40 s run, one per 2 s window: between them the map is
// solved and within its bound of the truth, beyond the last it says how far
// it extrapolates. One mapping alone, extrapolated over the run as the
// collector's record was before it kept them all, errs far more.
TEST(RecordedMappingTest, InterpolatesBetweenTheMappingsAPageShowed) {
  const TrueHostClock truth;
  std::vector<RecordedMapping> series;
  for (int k = 0; k <= 20; ++k) series.push_back(truth.PageAt(2.0 * k * kSecond, 5));
  std::shared_ptr<ClusterCorrection> keep;
  const auto map = MapOf(SpaceWith(series), &keep);
  ASSERT_TRUE(map);
  std::shared_ptr<ClusterCorrection> keep_last;
  const auto last_only = MapOf(SpaceWith({series.back()}), &keep_last);
  ASSERT_TRUE(last_only);
  double worst = 0, worst_last_only = 0;
  for (int64_t host = series.front().ref_ns; host < series.back().ref_ns; host += 77'777'777) {
    const auto m = map->Map({host, 0});
    ASSERT_TRUE(m);
    const double error = static_cast<double>(m->cluster.ns - kRef) - truth.ClusterAt(host);
    EXPECT_EQ(m->quality, MapQuality::kSolved) << host;
    EXPECT_LE(std::abs(error), m->uncertainty_ns) << host;
    worst = std::max(worst, std::abs(error));
    const auto l = last_only->Map({host, 0});
    ASSERT_TRUE(l);
    worst_last_only =
        std::max(worst_last_only, std::abs(static_cast<double>(l->cluster.ns - kRef) - truth.ClusterAt(host)));
  }
  // The drift's change bends the truth off each 2 s chord by up to 5 ns;
  // the page's whole nanoseconds add one more.
  EXPECT_LT(worst, 7.0);
  EXPECT_GT(worst_last_only, 100 * worst);  // 40 s back at a drift 0.4 ppm off: ~8 µs
  const auto beyond = map->Map({series.back().ref_ns + 3 * kSecond, 0});
  ASSERT_TRUE(beyond);
  EXPECT_EQ(beyond->quality, MapQuality::kExtrapolated);
  EXPECT_NEAR(static_cast<double>(beyond->beyond_span_ns), 3e9, 1e6);
}

// Collectors before the line recorded the last mapping alone, as plane
// stats: still read, a series of one, extrapolated both ways at its drift.
TEST(RecordedMappingTest, AFileWithTheLastMappingAloneIsASeriesOfOne) {
  RecordedMapping m;
  m.ref_ns = kRef;
  m.offset_ns = 5'000'000;     // cluster − host
  m.drift_ppt = 10'000'000;    // 10 ppm
  m.uncertainty_ns = 100;
  xspace::XSpace space;
  xspace::XPlane* plane = GetOrCreatePlane(&space, kRecordedMappingPlane);
  SetPlaneStats(plane, m);
  SetPlaneStatInt64(plane, kRecordedNodeStat, 3);
  const auto recorded = ReadRecordedMappings(space, nullptr);
  ASSERT_TRUE(recorded);
  EXPECT_EQ(recorded->node_id, 3u);
  ASSERT_EQ(recorded->mappings.size(), 1u);
  std::shared_ptr<ClusterCorrection> keep;
  const auto map = MapOf(space, &keep);
  ASSERT_TRUE(map);
  const auto at_ref = map->Map({kRef, 0});
  ASSERT_TRUE(at_ref);
  EXPECT_EQ(at_ref->cluster, (TraceInstant{kRef + 5'000'000, 0}));
  EXPECT_NEAR(at_ref->uncertainty_ns, 300.0, 0.01);  // three sigmas
  // One second earlier: 10 µs less correction; the bound grows at the drift floor.
  const auto before = map->Map({kRef - kSecond, 0});
  ASSERT_TRUE(before);
  EXPECT_NEAR(before->correction_ns, 5'000'000.0 - 10'000.0, 0.01);
  EXPECT_EQ(before->quality, MapQuality::kExtrapolated);
  EXPECT_NEAR(before->uncertainty_ns, 300.0 + 100.0, 0.01);  // 0.1 ppm of 1 s
}

TEST(RecordedMappingTest, ARepeatedInstantKeepsItsLastReading) {
  const TrueHostClock truth;
  RecordedMapping first = truth.PageAt(0, 50), again = truth.PageAt(0, 7), next = truth.PageAt(2e9, 7);
  const auto recorded = ReadRecordedMappings(SpaceWith({next, first, again}), nullptr);
  ASSERT_TRUE(recorded);
  ASSERT_EQ(recorded->mappings.size(), 2u);  // by instant, one each
  EXPECT_EQ(recorded->mappings[0].uncertainty_ns, 7);
  EXPECT_EQ(recorded->mappings[1].ref_ns, next.ref_ns);
}

TEST(RecordedMappingTest, ASpaceWithoutAUsableRecordSaysWhy) {
  std::string why;
  EXPECT_FALSE(ReadRecordedMappings(xspace::XSpace{}, &why));
  EXPECT_NE(why.find("no collector clock plane"), std::string::npos) << why;
  EXPECT_FALSE(ReadRecordedMappings(SpaceWith({}), &why));  // the collector saw no valid page
  EXPECT_NE(why.find("no clock page mapping"), std::string::npos) << why;
  const TrueHostClock truth;
  RecordedMapping bad = truth.PageAt(0, 5);
  bad.uncertainty_ns = -1;
  EXPECT_FALSE(ReadRecordedMappings(SpaceWith({truth.PageAt(2e9, 5), bad}), &why));
  EXPECT_NE(why.find("not sane"), std::string::npos) << why;
  bad = truth.PageAt(0, 5);
  bad.drift_ppt = 300'000'000'000;  // 30 %
  EXPECT_FALSE(ReadRecordedMappings(SpaceWith({bad}), &why));
  // A mapping event without its offset.
  xspace::XSpace torn = SpaceWith({truth.PageAt(0, 5)});
  xspace::XEvent* e = torn.mutable_planes(0)->mutable_lines(0)->mutable_events(0);
  e->mutable_stats()->erase(e->mutable_stats()->begin() + 1);
  EXPECT_FALSE(ReadRecordedMappings(torn, &why));
  EXPECT_NE(why.find("lacks"), std::string::npos) << why;
}

// The host clock stepped back between two mappings: no monotonic map
// exists, and the correction says where.
TEST(RecordedMappingTest, AHostClockThatWentBackMakesNoCorrection) {
  const TrueHostClock truth;
  RecordedMapping a = truth.PageAt(0, 5), b = truth.PageAt(2e9, 5);
  b.ref_ns = a.ref_ns - kSecond;  // read 2 s later, a host reading 1 s earlier
  b.offset_ns += 3 * kSecond;
  const auto recorded = ReadRecordedMappings(SpaceWith({a, b}), nullptr);
  ASSERT_TRUE(recorded);
  ClusterCorrection c;
  std::string error;
  EXPECT_FALSE(RecordedCorrection(*recorded, "node3.xplane.pb", &c, &error));
  EXPECT_NE(error.find("node3.xplane.pb:"), std::string::npos) << error;
  EXPECT_NE(error.find("goes back"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink::trace
