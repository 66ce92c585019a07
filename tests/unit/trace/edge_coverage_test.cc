// Stretches without a usable edge (edges.jsonl) become gaps of the
// correction even where the leader still reported the node reachable.
#include "trace/correct/edge_coverage.h"

#include <gtest/gtest.h>

#include "tests/unit/trace/offsets_truth.h"
#include "trace/correct/clock_correction.h"
#include "trace/correct/host_clock_map.h"
#include "trace/correct/node_clock_map.h"

namespace chronolink::trace {
namespace {

using testing::TruthCluster;
using Json = nlohmann::ordered_json;

constexpr int64_t kT0 = 1'795'320'926'000'000'000;
constexpr int64_t kW = 2'000'000'000;

int64_t WindowStart(int k) { return kT0 + k * kW; }

// Every node probes every other in windows 0..last; `dead(node, k)` makes
// the lines of windows where it holds "none" (both directions).
std::string EdgesText(const TruthCluster& truth, const std::vector<uint32_t>& nodes, int last,
                      const std::function<bool(uint32_t, int)>& dead) {
  std::string text;
  for (int k = 0; k <= last; ++k) {
    for (uint32_t node : nodes) {
      for (uint32_t peer : nodes) {
        if (peer == node) continue;
        const bool none = dead(node, k) || dead(peer, k);
        const int64_t centre = WindowStart(k) + kW / 2;
        Json j;
        j["schema"] = "chronolink.edge.v1";
        j["node"] = node;
        j["peer"] = peer;
        j["window_start_ns"] = WindowStart(k);
        j["window_end_ns"] = WindowStart(k + 1);
        j["x0_ns"] = centre;
        j["estimator"] = none ? "none" : "max_margin";
        const double beta = static_cast<double>(truth.OffsetAt(peer, centre) - truth.OffsetAt(node, centre));
        j["beta_ns"] = none ? Json() : Json(beta);
        j["alpha"] = none ? Json() : Json(truth.Drift(peer) - truth.Drift(node));
        j["uncertainty_ns"] = none ? Json() : Json(100.0);
        text += j.dump() + "\n";
      }
    }
  }
  return text;
}

TruthCluster ThreeNodes() {
  return TruthCluster(kT0, {{1, {0, 0.0}}, {2, {-50'000'000, -100.0}}, {3, {50'000'000, 100.0}}}, 1);
}

EdgeCoverage MustRead(const std::string& text) {
  EdgeCoverage coverage;
  std::string error;
  EXPECT_TRUE(coverage.AddText(text, "edges.jsonl", &error)) << error;
  coverage.Finish();
  return coverage;
}

TEST(EdgeCoverageTest, FindsTheStretchWhereANodeHadNoUsableEdge) {
  const TruthCluster truth = ThreeNodes();
  const EdgeCoverage coverage =
      MustRead(EdgesText(truth, {1, 2, 3}, 30, [](uint32_t n, int k) { return n == 3 && k >= 10 && k < 15; }));
  EXPECT_TRUE(coverage.Holes(1).empty());
  EXPECT_TRUE(coverage.Holes(2).empty());
  ASSERT_EQ(coverage.Holes(3).size(), 1u);
  const NodeClockInterval hole = coverage.Holes(3)[0];
  // On node 3's clock: node 2's window 9 moved by its beta (node 3 reads
  // ~100 ms more than node 2) ends last; node 3's own window 15 starts first.
  EXPECT_NEAR(static_cast<double>(hole.start_ns - WindowStart(10)), 100e6, 5e6);
  EXPECT_NEAR(static_cast<double>(hole.end_ns - WindowStart(15)), 0, 1e6);
  EXPECT_FALSE(coverage.Knows(4));
  EXPECT_TRUE(coverage.Holes(4).empty());
  EXPECT_EQ(coverage.lines_read(), 31u * 6);
  EXPECT_EQ(coverage.lines_usable(), 31u * 6 - 5 * 4);
}

TEST(EdgeCoverageTest, ANodeWithoutAnyUsableEdgeIsOneHoleOverItsSpan) {
  const TruthCluster truth = ThreeNodes();
  const EdgeCoverage coverage = MustRead(EdgesText(truth, {1, 2, 3}, 4, [](uint32_t n, int) { return n == 2; }));
  ASSERT_EQ(coverage.Holes(2).size(), 1u);
  EXPECT_EQ(coverage.Holes(2)[0].start_ns, WindowStart(0));
  EXPECT_EQ(coverage.Holes(2)[0].end_ns, WindowStart(5));
}

TEST(EdgeCoverageTest, ReachableButUncoveredStretchesBecomeGapsWithAWiderBound) {
  const TruthCluster truth = ThreeNodes();
  const EdgeCoverage coverage =
      MustRead(EdgesText(truth, {1, 2, 3}, 30, [](uint32_t n, int k) { return n == 3 && k >= 10 && k < 15; }));
  // The leader still solved node 3 at every instant (estimates within two windows).
  std::string offsets;
  for (int k = 0; k <= 30; ++k) {
    for (uint32_t n : {1u, 2u, 3u}) offsets += truth.Line(n, WindowStart(k) + kW / 2).dump() + "\n";
  }
  OffsetsReader reader;
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(reader.AddText(offsets, "offsets.jsonl", &error) && reader.Finish(&input, &error)) << error;
  ClusterCorrection with, without;
  ASSERT_TRUE(ClusterCorrection::FromOffsets(input, &with, &error, {}, &coverage)) << error;
  ASSERT_TRUE(ClusterCorrection::FromOffsets(input, &without, &error)) << error;
  EXPECT_EQ(with.source().edges_files, std::vector<std::string>{"edges.jsonl"});
  const TraceInstant middle = truth.NodeReadingAt(3, WindowStart(12) + kW / 2);
  const CorrectedInstant plain = *without.Node(3)->ToCluster(middle);
  const CorrectedInstant marked = *with.Node(3)->ToCluster(middle);
  EXPECT_EQ(plain.quality, CorrectionQuality::kSolved);
  EXPECT_EQ(marked.quality, CorrectionQuality::kGap);
  EXPECT_EQ(marked.cluster, plain.cluster);  // the same estimate, a wider bound
  // About 5 s from the nearest covered instant, at least 0.1 ppm of it.
  EXPECT_GE(marked.uncertainty_ns - plain.uncertainty_ns, 0.1e-6 * 4.9e9);
  const TraceInstant elsewhere = truth.NodeReadingAt(3, WindowStart(20));
  EXPECT_EQ(with.Node(3)->ToCluster(elsewhere)->quality, CorrectionQuality::kSolved);
  EXPECT_EQ(with.Node(2)->ToCluster(truth.NodeReadingAt(2, WindowStart(12)))->quality, CorrectionQuality::kSolved);
}

// A cursor keeps a piece and, between knots with no hole, computes each
// instant's bound inline (MapPiece::MapWithBound): it must be Map's, to the
// bit, on both sides of the hole and in it (where the piece says no inline bound).
TEST(EdgeCoverageTest, ACursorGivesMapsValuesAroundAHole) {
  const TruthCluster truth = ThreeNodes();
  const EdgeCoverage coverage =
      MustRead(EdgesText(truth, {1, 2, 3}, 30, [](uint32_t n, int k) { return n == 3 && k >= 10 && k < 15; }));
  std::string offsets;
  for (int k = 0; k <= 30; ++k) {
    if (k == 20) continue;  // a missed instant: a gap segment too
    for (uint32_t n : {1u, 2u, 3u}) offsets += truth.Line(n, WindowStart(k) + kW / 2).dump() + "\n";
  }
  OffsetsReader reader;
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(reader.AddText(offsets, "offsets.jsonl", &error) && reader.Finish(&input, &error)) << error;
  auto with = std::make_shared<ClusterCorrection>();
  ASSERT_TRUE(ClusterCorrection::FromOffsets(input, with.get(), &error, {}, &coverage)) << error;
  for (uint32_t node : {2u, 3u}) {
    const auto map = MakeNodeClockMap(with, with->Node(node));
    MapCursor cursor(*map);
    int inline_pieces = 0, general_pieces = 0;
    for (int64_t i = -20; i <= 640; ++i) {
      const TraceInstant x = TraceInstant{truth.NodeReadingAt(node, kT0 + i * (kW / 20)).ns + i * 7,
                                          static_cast<int32_t>((i * 7919 % 1000 + 1000) % 1000)};
      const MapPiece piece = map->PieceAt(x);
      (piece.bound_known ? inline_pieces : general_pieces)++;
      const auto want = map->Map(x);
      const auto got = cursor.Map(x);
      ASSERT_TRUE(want && got);
      EXPECT_EQ(got->cluster, want->cluster);
      EXPECT_EQ(got->uncertainty_ns, want->uncertainty_ns);
      EXPECT_EQ(got->quality, want->quality);
      EXPECT_EQ(got->beyond_span_ns, want->beyond_span_ns);
      EXPECT_EQ(got->correction_ns, want->correction_ns);
    }
    EXPECT_GT(inline_pieces, 0);
    EXPECT_GT(general_pieces, 0);  // before the first knot, after the last, and (node 3) the hole
  }
}

TEST(EdgeCoverageTest, BadLinesNameFileAndLine) {
  const TruthCluster truth = ThreeNodes();
  const std::string good = EdgesText(truth, {1, 2}, 0, [](uint32_t, int) { return false; });  // 2 lines
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "edges.jsonl:3: not a JSON object"},
      {R"({"schema":"chronolink.offset.v1"})", "edges.jsonl:3: schema is not \"chronolink.edge.v1\""},
      {R"({"schema":"chronolink.edge.v1","node":"1","peer":2})", "edges.jsonl:3: field \"node\" must be a node id"},
      {R"({"schema":"chronolink.edge.v1","node":1,"peer":2,"window_start_ns":5.5,"window_end_ns":7})",
       "edges.jsonl:3: field \"window_start_ns\" must be an int64 integer"},
      {R"({"schema":"chronolink.edge.v1","node":1,"peer":2,"window_start_ns":5,"window_end_ns":7})",
       "edges.jsonl:3: field \"estimator\" must be a string"},
      {R"({"schema":"chronolink.edge.v1","node":1,"peer":2,"window_start_ns":7,"window_end_ns":7,"estimator":"none"})",
       "edges.jsonl:3: window_end_ns is not after window_start_ns"},
  };
  for (const auto& [line, expected] : cases) {
    EdgeCoverage coverage;
    std::string error;
    EXPECT_FALSE(coverage.AddText(good + line + "\n", "edges.jsonl", &error));
    EXPECT_EQ(error.rfind(expected, 0), 0u) << error;
    EdgeCoverage lenient(/*skip_bad_lines=*/true);
    EXPECT_TRUE(lenient.AddText(good + line + "\n", "edges.jsonl", &error)) << error;
    EXPECT_EQ(lenient.lines_skipped(), 1u);
  }
  EdgeCoverage coverage;
  std::string error;
  EXPECT_FALSE(coverage.AddFile("/nonexistent/edges.jsonl", &error));
  EXPECT_EQ(error, "/nonexistent/edges.jsonl: cannot open: No such file or directory");
  EXPECT_FALSE(coverage.AddFile("/tmp", &error));
  EXPECT_EQ(error, "/tmp: is a directory, not a file");
}

}  // namespace
}  // namespace chronolink::trace
