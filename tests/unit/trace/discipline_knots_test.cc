// The correction between solved instants against exact disciplined clocks
// (clock/clock_trajectory.h): two nodes whose daemons change REALTIME's
// rate by up to 2 ppm every 0.7-1.3 s, over oscillators of their own;
// offsets.jsonl lines exact at the solved instants, timebase.jsonl knots
// where each rate changed. With the timebases the map follows both clocks
// to a nanosecond; without them the straight line between instants misses
// by hundreds of ns. Also: the reader's refusals, and what is not followed
// (a gap, a step, a timebase that does not cover, a mean reference).
#include "trace/correct/discipline_knots.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "clock/clock_trajectory.h"
#include "trace/correct/clock_correction.h"

namespace chronolink::trace {
namespace {

constexpr int64_t kT0 = 1'795'320'926'000'000'000;
constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kPeriod = 2 * kSecond;

struct Node {
  uint32_t id;
  ClockTrajectory raw;
  ClockTrajectory correction;
  ClockTrajectory realtime;
  std::vector<int64_t> changes;  // true instants of the daemon's rate changes
};

// An oscillator `ppm` off with a daemon changing the rate every
// `every_ms` by up to ±`change_ppm` (around -ppm: a trained daemon).
Node MakeNode(uint32_t id, int64_t offset_ns, int64_t ppm, int every_ms, int64_t change_ppm, uint64_t seed) {
  Node n{id, ClockTrajectory(kT0 - 10 * kSecond, kT0 - 10 * kSecond + offset_ns, kFinePerNs + ppm * 1'000'000'000),
         {}, {}, {}};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> change(-change_ppm * 1'000'000'000, change_ppm * 1'000'000'000);
  int64_t slope = -ppm * 1'000'000'000;
  n.correction = ClockTrajectory(kT0 - 10 * kSecond, 0, slope);
  for (int64_t t = kT0 - 9 * kSecond; t < kT0 + 80 * kSecond; t += every_ms * 1'000'000LL + 12'345) {
    slope += change(rng);
    n.correction.ChangeAt(t, slope);
    n.changes.push_back(t);
  }
  n.realtime = ClockTrajectory::Sum(n.raw, n.correction);
  return n;
}

double Exact(const ClockTrajectory& c, int64_t t) { return static_cast<double>(c.ValueAt(t) - static_cast<FineNs>(kT0) * kFinePerNs) / 1e15; }

// offsets.jsonl of `node` against reference `ref`, exact at every instant.
std::string OffsetsText(const Node& ref, const Node& node, int instants) {
  std::string text;
  for (int k = 0; k < instants; ++k) {
    const int64_t T = kT0 + kPeriod / 2 + k * kPeriod;
    const int64_t t = ref.realtime.TrueInstantOf(T);
    for (const Node* n : {&ref, &node}) {
      nlohmann::ordered_json j;
      j["schema"] = "chronolink.offset.v1";
      j["node"] = n->id;
      j["reference"] = ref.id;
      j["t_ns"] = T;
      j["offset_ns"] = n == &ref ? 0.0 : Exact(node.realtime, t) - Exact(ref.realtime, t);
      j["drift"] = 0.0;
      j["uncertainty_ns"] = n == &ref ? 0.0 : 5.0;
      j["residual_ns"] = 0.0;
      j["reachable"] = true;
      j["component"] = 0;
      j["edges_used"] = 2;
      text += j.dump() + "\n";
    }
  }
  return text;
}

// timebase.jsonl: a knot at every rate change (as the agent places them
// from the kernel's rate), REALTIME and RAW floored as the clocks read.
std::string TimebaseText(const Node& n, const std::string& session = "7") {
  std::string text;
  for (const int64_t t : n.changes) {
    nlohmann::ordered_json j;
    j["after_step"] = false;
    j["node"] = n.id;
    j["raw_ns"] = n.raw.ReadAt(t);
    j["realtime_ns"] = n.realtime.ReadAt(t);
    j["schema"] = kTimebaseSchema;
    j["session"] = session;
    text += j.dump() + "\n";
  }
  return text;
}

bool Build(const std::string& offsets, const std::vector<std::string>& timebases, ClusterCorrection* out,
           std::string* error) {
  OffsetsReader reader;
  OffsetsInput input;
  if (!reader.AddText(offsets, "offsets.jsonl", error) || !reader.Finish(&input, error)) return false;
  if (timebases.empty()) return ClusterCorrection::FromOffsets(input, out, error);
  TimebaseReader tb;
  for (size_t i = 0; i < timebases.size(); ++i) {
    if (!tb.AddText(timebases[i], "timebase" + std::to_string(i) + ".jsonl", error)) return false;
  }
  ClusterCorrection::Timebases shapes;
  if (!tb.Finish(&shapes.nodes, error)) return false;
  shapes.files = {"timebase0.jsonl"};
  return ClusterCorrection::FromOffsets(input, out, error, {}, nullptr, &shapes);
}

// The worst |cluster − true reference REALTIME| over node readings between
// the first and the last instant.
double WorstError(const ClusterCorrection& c, const Node& ref, const Node& node, int instants) {
  const NodeCorrection* map = c.Node(node.id);
  EXPECT_NE(map, nullptr);
  if (map == nullptr) return INFINITY;
  std::mt19937_64 rng(11);
  const int64_t first = ref.realtime.TrueInstantOf(kT0 + kPeriod / 2);
  const int64_t last = ref.realtime.TrueInstantOf(kT0 + kPeriod / 2 + (instants - 1) * kPeriod);
  std::uniform_int_distribution<int64_t> instant(first + 1, last - 1);
  double worst = 0;
  for (int i = 0; i < 20'000; ++i) {
    const int64_t t = instant(rng);
    const int64_t x = node.realtime.ReadAt(t);
    const auto c_at = map->ToCluster({x, 0});
    EXPECT_TRUE(c_at.has_value());
    if (!c_at) return INFINITY;
    const double cluster = static_cast<double>(c_at->cluster.ns - kT0) + c_at->cluster.ps / 1000.0;
    // The true instant of the reading x (floored), and the reference there.
    const int64_t tx = node.realtime.TrueInstantOf(x);
    worst = std::max(worst, std::fabs(cluster - Exact(ref.realtime, tx)));
  }
  return worst;
}

TEST(FollowDiscipline, BetweenSolvedInstantsTheMapFollowsBothDaemonsToANanosecond) {
  const Node ref = MakeNode(1, 0, 5, 1300, 1, 3);
  const Node node = MakeNode(2, 3'000'000, -20, 700, 2, 4);
  const std::string offsets = OffsetsText(ref, node, 30);
  ClusterCorrection straight, followed;
  std::string error;
  ASSERT_TRUE(Build(offsets, {}, &straight, &error)) << error;
  ASSERT_TRUE(Build(offsets, {TimebaseText(ref), TimebaseText(node)}, &followed, &error)) << error;
  const double without = WorstError(straight, ref, node, 30);
  const double with = WorstError(followed, ref, node, 30);
  EXPECT_GT(without, 100.0) << "a straight line between instants 2 s apart misses the daemons' bends";
  EXPECT_LE(with, 2.5) << "the knots' two readings and the node's floor to the ns";
  std::printf("worst |error| between instants: %.1f ns straight, %.2f ns following the timebases\n", without, with);
  const CorrectionSource& s = followed.source();
  EXPECT_EQ(s.discipline.intervals_followed, 29u);
  EXPECT_GT(s.discipline.instants_added, 29u * 3);
  EXPECT_EQ(s.instants, 30u) << "the instants added are not solved ones";
  EXPECT_EQ(followed.Node(node.id)->gap_segments(), 0u) << "no gap where none was";
  EXPECT_NE(followed.Describe().find("following the clocks' discipline"), std::string::npos);
  EXPECT_NE(followed.Node(node.id)->Describe().find("between 30 solved instants"), std::string::npos)
      << followed.Node(node.id)->Describe();
  // The reference's own map is untouched: its offset is 0 throughout.
  EXPECT_EQ(followed.Node(ref.id)->knots().size(), 30u);
}

// Around its own clock step (or a fit clock anchored again) a node misses
// instants: the gap keeps its wider bound, but where both timebases cover
// it the map follows the daemons there as anywhere else (a straight line
// over 6 s of a PLL's swings misses by tens of µs).
TEST(FollowDiscipline, AcrossAGapTheMapStillFollowsTheDaemonsAndKeepsTheGapsBound) {
  const Node ref = MakeNode(1, 0, 5, 1300, 1, 3);
  const Node node = MakeNode(2, 3'000'000, -20, 700, 2, 4);
  std::string offsets;
  {  // node 2 unreachable at instants 10 and 11 (the reference solved them)
    std::istringstream lines(OffsetsText(ref, node, 30));
    for (std::string line; std::getline(lines, line);) {
      auto j = nlohmann::ordered_json::parse(line);
      const int64_t k = (j["t_ns"].get<int64_t>() - kT0 - kPeriod / 2) / kPeriod;
      if (j["node"] == 2 && (k == 10 || k == 11)) {
        j["reachable"] = false;
        for (const char* f : {"offset_ns", "drift", "uncertainty_ns", "residual_ns"}) j[f] = nullptr;
      }
      offsets += j.dump() + "\n";
    }
  }
  ClusterCorrection straight, followed;
  std::string error;
  ASSERT_TRUE(Build(offsets, {}, &straight, &error)) << error;
  ASSERT_TRUE(Build(offsets, {TimebaseText(ref), TimebaseText(node)}, &followed, &error)) << error;
  EXPECT_GT(WorstError(straight, ref, node, 30), 1000.0);
  EXPECT_LE(WorstError(followed, ref, node, 30), 2.5) << "the gap followed too";
  const NodeCorrection& n = *followed.Node(node.id);
  EXPECT_GT(n.gap_segments(), 1u) << "every piece of the gap is still a gap";
  const int64_t mid = ref.realtime.TrueInstantOf(kT0 + kPeriod / 2 + 11 * kPeriod);
  const auto in_gap = n.ToCluster({node.realtime.ReadAt(mid), 0});
  ASSERT_TRUE(in_gap.has_value());
  EXPECT_EQ(in_gap->quality, CorrectionQuality::kGap);
  const auto solved = n.ToCluster({node.realtime.ReadAt(ref.realtime.TrueInstantOf(kT0 + kPeriod / 2 + 20 * kPeriod)), 0});
  ASSERT_TRUE(solved.has_value());
  EXPECT_LT(solved->uncertainty_ns, in_gap->uncertainty_ns);
}

TEST(FollowDiscipline, OnlyTheNodesShapeWhenTheReferenceIsUndisciplined) {
  Node ref = MakeNode(1, 0, 5, 1300, 0, 3);  // a daemon that never changes the rate
  const Node node = MakeNode(2, -7'000'000, 40, 900, 2, 5);
  ClusterCorrection followed;
  std::string error;
  ASSERT_TRUE(Build(OffsetsText(ref, node, 20), {TimebaseText(node)}, &followed, &error)) << error;
  EXPECT_LE(WorstError(followed, ref, node, 20), 2.5);
}

TEST(FollowDiscipline, ATimebaseThatDoesNotCoverAnIntervalLeavesItStraightAndSaysSo) {
  const Node ref = MakeNode(1, 0, 5, 1300, 0, 3);
  Node node = MakeNode(2, 3'000'000, -20, 700, 2, 4);
  // Knots only for the first 20 s: the intervals after are not covered.
  node.changes.erase(std::remove_if(node.changes.begin(), node.changes.end(),
                                    [](int64_t t) { return t > kT0 + 20 * kSecond; }),
                     node.changes.end());
  ClusterCorrection followed;
  std::string error;
  ASSERT_TRUE(Build(OffsetsText(ref, node, 20), {TimebaseText(node)}, &followed, &error)) << error;
  EXPECT_GT(followed.source().discipline.intervals_uncovered, 5u);
  EXPECT_GT(followed.source().discipline.intervals_followed, 5u);
}

TEST(FollowDiscipline, AMeanReferenceIsRefusedWithAReason) {
  const Node ref = MakeNode(1, 0, 5, 1300, 1, 3);
  const Node node = MakeNode(2, 3'000'000, -20, 700, 2, 4);
  std::string offsets = OffsetsText(ref, node, 5);
  for (size_t at = 0; (at = offsets.find("\"reference\":1", at)) != std::string::npos;) {
    offsets.replace(at, 13, "\"reference\":\"mean\"");
  }
  ClusterCorrection c;
  std::string error;
  EXPECT_FALSE(Build(offsets, {TimebaseText(node)}, &c, &error));
  EXPECT_NE(error.find("needs a named reference"), std::string::npos) << error;
}

TEST(TimebaseReader, RefusesWhatIsNotATimebaseAndSplitsAtStepsAndSessions) {
  TimebaseReader r;
  std::string error;
  EXPECT_FALSE(r.AddText("{\"schema\":\"chronolink.offset.v1\"}", "t.jsonl", &error));
  EXPECT_NE(error.find("t.jsonl:1: schema"), std::string::npos) << error;
  EXPECT_FALSE(r.AddText("{\"schema\":\"chronolink.timebase.v1\",\"node\":1}", "t.jsonl", &error));
  EXPECT_NE(error.find("needs integer node"), std::string::npos) << error;
  const std::string k = "{\"schema\":\"chronolink.timebase.v1\",\"node\":1,\"session\":\"S\",\"after_step\":";
  EXPECT_FALSE(r.AddText(k + "false,\"raw_ns\":10,\"realtime_ns\":100}\n" + k +
                             "false,\"raw_ns\":9,\"realtime_ns\":200}",
                         "t.jsonl", &error));
  EXPECT_NE(error.find("t.jsonl:2: a knot must come after"), std::string::npos) << error;

  TimebaseReader ok;
  ASSERT_TRUE(ok.AddText(k + "false,\"raw_ns\":10,\"realtime_ns\":100}\n" + k +
                             "false,\"raw_ns\":20,\"realtime_ns\":110}\n" + k +
                             "true,\"raw_ns\":30,\"realtime_ns\":50}\n" + k + "false,\"raw_ns\":40,\"realtime_ns\":60}\n",
                         "t.jsonl", &error))
      << error;
  std::map<uint32_t, NodeTimebase> nodes;
  ASSERT_TRUE(ok.Finish(&nodes, &error)) << error;
  ASSERT_EQ(nodes.at(1).stretches.size(), 2u) << "a step starts a stretch of its own";
  EXPECT_EQ(nodes.at(1).Covering(100, 110), &nodes.at(1).stretches[1]) << "sorted by REALTIME";
  EXPECT_EQ(nodes.at(1).Covering(55, 105), nullptr) << "nothing across a step";
  EXPECT_NEAR(static_cast<double>(nodes.at(1).Covering(100, 110)->RawSince(100, 105)), 5.0, 1e-9);
  TimebaseReader empty;
  EXPECT_FALSE(empty.Finish(&nodes, &error));
}

// The leader's cluster-timebase.jsonl marks where knots never reached it.
TEST(TimebaseReader, AGapInTheLeadersCopyStartsAStretch) {
  const std::string k = "{\"schema\":\"chronolink.timebase.v1\",\"node\":2,\"session\":\"S\",\"after_step\":false,";
  std::string error;
  TimebaseReader r;
  ASSERT_TRUE(r.AddText(k + "\"raw_ns\":10,\"realtime_ns\":100}\n" + k + "\"raw_ns\":20,\"realtime_ns\":110}\n" + k +
                            "\"after_gap\":true,\"raw_ns\":40,\"realtime_ns\":130}\n" + k +
                            "\"after_gap\":false,\"raw_ns\":50,\"realtime_ns\":140}\n",
                        "cluster-timebase.jsonl", &error))
      << error;
  std::map<uint32_t, NodeTimebase> nodes;
  ASSERT_TRUE(r.Finish(&nodes, &error)) << error;
  ASSERT_EQ(nodes.at(2).stretches.size(), 2u);
  EXPECT_EQ(nodes.at(2).Covering(105, 135), nullptr) << "nothing assumed across the gap";
  EXPECT_NE(nodes.at(2).Covering(131, 139), nullptr);
  // Two leaders' files hold the same node and session, each from when it led.
  TimebaseReader two;
  ASSERT_TRUE(two.AddText(k + "\"raw_ns\":10,\"realtime_ns\":100}\n" + k + "\"raw_ns\":20,\"realtime_ns\":110}\n",
                          "leader1/cluster-timebase.jsonl", &error))
      << error;
  ASSERT_TRUE(two.AddText(k + "\"raw_ns\":15,\"realtime_ns\":105}\n" + k + "\"raw_ns\":30,\"realtime_ns\":120}\n",
                          "leader2/cluster-timebase.jsonl", &error))
      << error;
  ASSERT_TRUE(two.Finish(&nodes, &error)) << error;
  EXPECT_EQ(nodes.at(2).stretches.size(), 2u);
  EXPECT_NE(nodes.at(2).Covering(112, 118), nullptr);
  TimebaseReader bad;
  EXPECT_FALSE(bad.AddText(k + "\"after_gap\":1,\"raw_ns\":10,\"realtime_ns\":100}", "c.jsonl", &error));
  EXPECT_NE(error.find("c.jsonl:1: after_gap is not a boolean"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink::trace
