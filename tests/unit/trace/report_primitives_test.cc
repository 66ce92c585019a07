// The SVG report's building blocks: text escaping, number formatting,
// scales and the per-pixel-column decimation that keeps spikes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trace/report/axis_scale.h"
#include "trace/report/node_series.h"
#include "trace/report/pixel_decimation.h"
#include "trace/report/svg_text.h"

namespace chronolink::trace::report {
namespace {

TEST(ReportTextTest, EscapesMarkupAndQuotes) {
  EXPECT_EQ(XmlText("<b>&\"x\"'"), "&lt;b&gt;&amp;&quot;x&quot;&#39;");
  EXPECT_EQ(XmlText("gpu-7.example.com"), "gpu-7.example.com");
}

TEST(ReportTextTest, ReplacesControlBytesAndBrokenUtf8) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(XmlText(std::string("a\x01z", 3)), "a" + replacement + "z");
  EXPECT_EQ(XmlText(std::string("a\0z", 3)), "a" + replacement + "z");
  EXPECT_EQ(XmlText("\xC3\x28"), replacement + "(");          // truncated two-byte sequence
  EXPECT_EQ(XmlText("\xED\xA0\x80"), replacement + replacement + replacement);  // a surrogate
  EXPECT_EQ(XmlText("\xC0\xAF"), replacement + replacement);  // overlong '/'
  EXPECT_EQ(XmlText("tab\there"), "tab\there");
  EXPECT_EQ(XmlText("µs σ −"), "µs σ −");
}

TEST(ReportTextTest, EllipsizeCountsCharactersNotBytes) {
  EXPECT_EQ(Ellipsize("short", 10), "short");
  EXPECT_EQ(Ellipsize("abcdef", 4), "abc…");
  EXPECT_EQ(Ellipsize("σσσσσσ", 4), "σσσ…");
  EXPECT_EQ(Ellipsize("abcd", 4), "abcd");
  EXPECT_EQ(Ellipsize("abcd", 0), "");
}

TEST(ReportTextTest, WrapBreaksAtSpacesAndCutsLongWords) {
  EXPECT_EQ(WrapText("one two three four", 9), (std::vector<std::string>{"one two", "three", "four"}));
  EXPECT_EQ(WrapText("/a/very/long/path ok", 6), (std::vector<std::string>{"/a/ver", "y/long", "/path", "ok"}));
  EXPECT_EQ(WrapText("σσσσ σ", 3), (std::vector<std::string>{"σσσ", "σ σ"}));
  EXPECT_EQ(WrapText("", 10), (std::vector<std::string>{""}));
}

TEST(ReportTextTest, DurationsPickTheirUnit) {
  EXPECT_EQ(FormatDurationNs(41.2), "41.2 ns");
  EXPECT_EQ(FormatDurationNs(41), "41 ns");
  EXPECT_EQ(FormatDurationNs(999.96), "1.00 µs");
  EXPECT_EQ(FormatDurationNs(-1500), "−1.50 µs");
  EXPECT_EQ(FormatDurationNs(23'001'234.5), "23.0 ms");
  EXPECT_EQ(FormatDurationNs(120e9), "120 s");
  EXPECT_EQ(FormatMsPrecise(-23'001'234.75), "−23.001235 ms");
  EXPECT_EQ(FormatNumber(-0.0001, 2), "0.00");  // no "−0.00"
  EXPECT_EQ(FormatCount(1234567), "1\u2009234\u2009567");
}

TEST(ReportTextTest, UtcTimesAndOutOfRangeInstants) {
  EXPECT_EQ(FormatUtc(int64_t{1'795'324'431'123'000'000}), "2026-11-22 05:13:51.123 UTC");
  EXPECT_EQ(FormatUtc(int64_t{-5}), "−5 ns");
}

TEST(AxisScaleTest, LinearDomainWidensToNiceTicks) {
  const LinearScale y(-23.0012, -17.2, 100, 0, 3);
  EXPECT_LE(y.lo(), -23.0012);
  EXPECT_GE(y.hi(), -17.2);
  EXPECT_DOUBLE_EQ(y(y.lo()), 100);
  EXPECT_DOUBLE_EQ(y(y.hi()), 0);
  for (double tick : y.ticks()) EXPECT_NEAR(std::remainder(tick, 5.0), 0.0, 1e-9) << tick;
}

TEST(AxisScaleTest, FlatSeriesStillGetsARange) {
  const LinearScale y(0, 0, 50, 0, 2);
  EXPECT_LT(y.lo(), 0);
  EXPECT_GT(y.hi(), 0);
  EXPECT_NEAR(y(0), 25, 1e-9);
  const LinearScale big(-23.5, -23.5, 50, 0, 2);
  EXPECT_LT(big.lo(), -23.5);
  EXPECT_GT(big.hi(), -23.5);
}

TEST(AxisScaleTest, LogScaleSpansWholeDecades) {
  const LogScale x(35, 12'000'000, 1, 0, 700);
  ASSERT_EQ(x.decades().front(), 10);
  ASSERT_EQ(x.decades().back(), 1e8);
  EXPECT_DOUBLE_EQ(x(10), 0);
  EXPECT_DOUBLE_EQ(x(1e8), 700);
  EXPECT_DOUBLE_EQ(x(0), 0);  // zero sits on the axis
  EXPECT_NEAR(x(1000), 200, 1e-9);
}

TEST(PixelDecimationTest, KeepsASpikeAmong100kPointsIn500Columns) {
  std::vector<PlotPoint> points;
  for (int i = 0; i < 100'000; ++i) points.push_back({i * 500.0 / 100'000, std::sin(i * 1e-3)});
  points[61'234].y = 40;
  points[70'001].y = -40;
  const std::vector<PlotPoint> kept = DecimateMinMax(points);
  EXPECT_LE(kept.size(), 4u * 500);
  bool high = false, low = false;
  for (const PlotPoint& p : kept) {
    high |= p.y == 40;
    low |= p.y == -40;
  }
  EXPECT_TRUE(high);
  EXPECT_TRUE(low);
  // Series order survives: x never goes back.
  for (size_t i = 1; i < kept.size(); ++i) EXPECT_LE(kept[i - 1].x, kept[i].x);
}

TEST(PixelDecimationTest, SparseSeriesIsUntouched) {
  const std::vector<PlotPoint> points = {{0, 1}, {10, 3}, {20, 2}};
  const std::vector<PlotPoint> kept = DecimateMinMax(points);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[1].y, 3);
  EXPECT_TRUE(DecimateMinMax({}).empty());
}

TEST(PixelDecimationTest, SpansWidenThenMerge) {
  const auto merged = MergeSpans({{10, 10}, {11, 12}, {50, 60}, {55, 70}}, 3);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_DOUBLE_EQ(merged[0].x0, 8.5);
  EXPECT_DOUBLE_EQ(merged[0].x1, 13);
  EXPECT_DOUBLE_EQ(merged[1].x0, 50);
  EXPECT_DOUBLE_EQ(merged[1].x1, 70);
}

OffsetRecord Record(uint32_t node, int64_t t_ns, bool reachable) {
  OffsetRecord r;
  r.node = node;
  r.t_ns = t_ns;
  r.reachable = reachable;
  r.offset_ns = reachable ? 1e6 * node : 0;
  r.uncertainty_ns = reachable ? 10 : 0;
  return r;
}

TEST(NodeSeriesTest, StretchesBreakAtUnreachableAndMissingInstants) {
  OffsetsInput offsets;
  // Node 1 at every instant 0..9 s; node 2 unreachable at 3 s and absent at 6..7 s.
  for (int64_t t = 0; t < 10; ++t) offsets.records.push_back(Record(1, t * 1'000'000'000, true));
  for (int64_t t = 0; t < 10; ++t) {
    if (t == 6 || t == 7) continue;
    offsets.records.push_back(Record(2, t * 1'000'000'000, t != 3));
  }
  const RunTimeline timeline = BuildTimeline(offsets);
  ASSERT_EQ(timeline.instants.size(), 10u);
  EXPECT_EQ(timeline.period_ns, 1'000'000'000);
  const auto series = BuildNodeSeries(offsets, timeline);
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].solved_stretches.size(), 1u);
  EXPECT_EQ(series[0].missing, 0u);
  const NodeSeries& two = series[1];
  EXPECT_EQ(two.unreachable, 1u);
  EXPECT_EQ(two.missing, 2u);
  ASSERT_EQ(two.missing_runs.size(), 1u);
  EXPECT_EQ(two.missing_runs[0].first, 6u);
  EXPECT_EQ(two.missing_runs[0].last, 7u);
  // 0..2 | 4..5 | 8..9 (records 0-2, 4-5, 6-7 of node 2's eight).
  ASSERT_EQ(two.solved_stretches.size(), 3u);
  EXPECT_EQ(two.solved_stretches[1].first, 4u);
  EXPECT_EQ(two.solved_stretches[1].last, 5u);
  EXPECT_EQ(two.solved_stretches[2].first, 6u);
  EXPECT_DOUBLE_EQ(two.offset_min_ns, 2e6);
}

// A set-aside instant is solved but not followed: it breaks the line and
// stays out of the ranges, so its spike does not set the row's scale.
TEST(NodeSeriesTest, ASetAsideInstantBreaksTheLineAndStaysOutOfTheRanges) {
  OffsetsInput offsets;
  for (int64_t t = 0; t < 10; ++t) offsets.records.push_back(Record(2, t * 1'000'000'000, true));
  offsets.records[4].offset_ns = 5e9;
  offsets.records[4].uncertainty_ns = 1e6;
  std::vector<bool> set_aside(offsets.records.size(), false);
  set_aside[4] = true;
  const RunTimeline timeline = BuildTimeline(offsets);
  const NodeSeries kept = BuildNodeSeries(offsets, timeline)[0];
  EXPECT_EQ(kept.solved_stretches.size(), 1u);
  EXPECT_DOUBLE_EQ(kept.offset_max_ns, 5e9);
  const NodeSeries s = BuildNodeSeries(offsets, timeline, set_aside)[0];
  EXPECT_EQ(s.reachable, 10u);
  EXPECT_EQ(s.set_aside, 1u);
  ASSERT_EQ(s.set_aside_runs.size(), 1u);
  EXPECT_EQ(s.set_aside_runs[0].first, 4u);
  ASSERT_EQ(s.solved_stretches.size(), 2u);
  EXPECT_EQ(s.solved_stretches[0].last, 3u);
  EXPECT_EQ(s.solved_stretches[1].first, 5u);
  EXPECT_DOUBLE_EQ(s.offset_max_ns, 2e6);
  EXPECT_DOUBLE_EQ(s.sigma_max_ns, 10);
  EXPECT_DOUBLE_EQ(s.set_aside_sigma_max_ns, 1e6);
  EXPECT_EQ(s.missing, 0u);
}

}  // namespace
}  // namespace chronolink::trace::report
