// The SVG report rendered from offsets read by the real OffsetsReader, an
// align summary and validate results in the shapes the CLI writes, then
// parsed by an independent XML parser (Python's xml.dom.minidom) that
// reports what a reader would see: the node rows, the table rows, every
// text, the validate bars and the polylines' points.
#include "trace/report/svg_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trace/report/png_convert.h"

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kStart = 1'795'593'717'000'000'000;  // reference instants, epoch ns

// Prints, as JSON, what the SVG shows: parsed by minidom, so any
// ill-formed markup fails here.
constexpr char kInspector[] = R"py(
import json, sys, xml.dom.minidom as minidom
doc = minidom.parse(sys.argv[1])
root = doc.documentElement
def classes(el):
    return el.getAttribute("class").split() if el.nodeType == el.ELEMENT_NODE else []
def text_of(el):
    return "".join(c.data if c.nodeType == c.TEXT_NODE else text_of(c) for c in el.childNodes)
def points(el):
    return [[float(v) for v in p.split(",")] for p in el.getAttribute("points").split()]
out = {"root": root.tagName, "texts": [text_of(t) for t in root.getElementsByTagName("text")],
       "rows": [], "hosts": [], "skew_metrics": [], "bars_before": 0, "bars_after": 0}
for g in root.getElementsByTagName("g"):
    c = classes(g)
    if "node-row" in c:
        rects = g.getElementsByTagName("rect")
        frames = [r for r in rects if "frame" in classes(r)]
        out["rows"].append({
            "node": int(g.getAttribute("data-node")),
            "frame": {k: float(frames[0].getAttribute(k)) for k in ("x", "y", "width", "height")},
            "offset_lines": [points(p) for p in g.getElementsByTagName("polyline") if "offset-line" in classes(p)],
            "unreachable": sum("unreachable" in classes(r) for r in rects),
            "missing": sum("missing" in classes(r) for r in rects),
            "set_aside": sum("set-aside" in classes(r) for r in rects),
            "set_aside_marks": sum("set-aside-mark" in classes(e) for e in g.getElementsByTagName("*")),
            "gap_ticks": sum("gap-tick" in classes(l) for l in g.getElementsByTagName("line")),
            "texts": [text_of(t) for t in g.getElementsByTagName("text")]})
    elif "host-row" in c:
        out["hosts"].append(g.getAttribute("data-host"))
    elif "skew-metric" in c:
        out["skew_metrics"].append(g.getAttribute("data-metric"))
        for r in g.getElementsByTagName("rect"):
            out["bars_before"] += "bar-before" in classes(r)
            out["bars_after"] += "bar-after" in classes(r)
print(json.dumps(out))
)py";

class SvgReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("svg_report_test." + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "inspect.py") << kInspector;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the SVG and returns what the inspector saw; fails the test when
  // the file does not parse.
  json Inspect(const std::string& svg) {
    const fs::path path = dir_ / "report.svg";
    std::ofstream(path) << svg;
    const std::string command = "/usr/bin/python3 " + (dir_ / "inspect.py").string() + " " + path.string() + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    std::string output;
    char buffer[65536];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
    const int status = pclose(pipe);
    EXPECT_EQ(status, 0) << output;
    return status == 0 ? json::parse(output) : json::object();
  }

  fs::path dir_;
};

// offsets.jsonl text: `nodes` nodes (node 0 the reference) at `instants`
// instants one second apart; node n is offset by n·10 ms and drifts n·10 ppm.
std::string OffsetsText(int nodes, int instants, int64_t spacing_ns = 1'000'000'000) {
  std::string text;
  for (int i = 0; i < instants; ++i) {
    for (int n = 0; n < nodes; ++n) {
      const double elapsed_s = i * spacing_ns * 1e-9;
      text += json{{"schema", "chronolink.offset.v1"}, {"node", n}, {"reference", 0},
                   {"t_ns", kStart + i * spacing_ns},
                   {"offset_ns", n * 10e6 + n * 10e-6 * elapsed_s * 1e9},
                   {"drift", n * 10e-6}, {"uncertainty_ns", n == 0 ? 0.0 : 20.0 + n + (i % 7)},
                   {"residual_ns", 3.0}, {"reachable", true}, {"component", 0}, {"edges_used", 4},
                   {"leader", 0}}
                  .dump() +
              "\n";
    }
  }
  return text;
}

OffsetsInput ReadOffsets(const std::string& text) {
  OffsetsReader reader;
  OffsetsInput input;
  std::string error;
  EXPECT_TRUE(reader.AddText(text, "run/offsets.jsonl", &error)) << error;
  EXPECT_TRUE(reader.Finish(&input, &error)) << error;
  return input;
}

json HostSummary(const std::string& host, int node, int64_t gaps = 0, int64_t extrapolated = 0) {
  return {{"host", host}, {"node", node}, {"rule", "cluster file hostname"},
          {"correction", "node " + std::to_string(node) + ": 60 instants over 59 s, no gap"},
          {"events", 123456}, {"events_in_gaps", gaps}, {"events_extrapolated", extrapolated},
          {"max_beyond_span_ns", extrapolated ? 2'500'000'000 : 0},
          {"correction_first_ns", -node * 10e6}, {"correction_last_ns", -node * 10e6 - node * 300e3},
          {"uncertainty_min_ns", 61.0}, {"uncertainty_mean_ns", 75.5}, {"uncertainty_max_ns", 140.0}};
}

json Summary(const std::vector<json>& hosts) {
  return {{"schema", "chronolink.align_summary.v1"},
          {"offsets", "offsets.jsonl (1 file, 60 instants, reference node 0)"},
          {"origin_ns", kStart + 20'000'000'000},
          {"hosts", hosts}};
}

json Validate(int64_t violations, double skew_scale) {
  const auto skew = [&](double p50) {
    return json{{"count", 240}, {"p50_ns", p50}, {"p90_ns", p50 * 2}, {"p99_ns", p50 * 3}, {"max_ns", p50 * 4}};
  };
  json list = json::array();
  for (int64_t i = 0; i < std::min<int64_t>(violations, 3); ++i) {
    list.push_back({{"family", "xla:all-reduce"}, {"key", "all-reduce-start.3"}, {"seq", i}, {"transfer", false},
                    {"ended_first", "gpu0"}, {"started_last", "gpu3"}, {"by_ns", 29'000'000 - i}, {"participants", 4}});
  }
  return {{"schema", "chronolink.validate/1"}, {"hosts", {"gpu0", "gpu1", "gpu2", "gpu3"}}, {"tolerance_ps", 0},
          {"events", 960}, {"matched_instances", 240}, {"checked_instances", 240},
          {"violations_total", violations}, {"start_skew", skew(1000 * skew_scale)}, {"end_skew", skew(800 * skew_scale)},
          {"families", {{{"family", "xla:all-reduce"}, {"violations", violations},
                         {"matched_instances", 240}, {"start_skew", skew(1000 * skew_scale)}}}},
          {"violations", list}};
}

bool Contains(const json& texts, const std::string& needle) {
  for (const auto& t : texts) {
    if (t.get<std::string>().find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST_F(SvgReportTest, OneRowPerNodeAndOneTableRowPerTrace) {
  ReportData data;
  data.offsets = ReadOffsets(OffsetsText(5, 60));
  data.align_summary = Summary({HostSummary("gpu1", 1), HostSummary("gpu2", 2), HostSummary("gpu2-b", 2)});
  data.title = "training run 17";
  const json seen = Inspect(RenderSvgReport(data));
  EXPECT_EQ(seen["root"], "svg");
  ASSERT_EQ(seen["rows"].size(), 5u);
  for (int n = 0; n < 5; ++n) {
    EXPECT_EQ(seen["rows"][n]["node"], n);
    EXPECT_EQ(seen["rows"][n]["offset_lines"].size(), 1u) << "node " << n;
    EXPECT_EQ(seen["rows"][n]["unreachable"], 0);
  }
  EXPECT_TRUE(Contains(seen["rows"][0]["texts"], "REFERENCE"));
  EXPECT_FALSE(Contains(seen["rows"][1]["texts"], "REFERENCE"));
  EXPECT_TRUE(Contains(seen["rows"][2]["texts"], "2 traces: gpu2, gpu2-b"));
  EXPECT_TRUE(Contains(seen["rows"][3]["texts"], "no trace"));
  EXPECT_EQ(seen["hosts"], json({"gpu1", "gpu2", "gpu2-b"}));
  EXPECT_TRUE(Contains(seen["texts"], "training run 17"));
  EXPECT_TRUE(Contains(seen["texts"], "−20.000000 ms"));  // gpu2's correction at its start
  EXPECT_TRUE(Contains(seen["texts"], "−600 µs"));        // ... and its change over the trace
  EXPECT_TRUE(Contains(seen["texts"], "trace origin"));
  EXPECT_TRUE(Contains(seen["texts"], "Offsets source: run/offsets.jsonl"));
}

TEST_F(SvgReportTest, HostNamesFromFilesAreEscaped) {
  ReportData data;
  data.offsets = ReadOffsets(OffsetsText(2, 10));
  const std::string hostile = "<b>&\"x\"";
  data.align_summary = Summary({HostSummary(hostile, 1), HostSummary("bad\xff\x01utf8", 1)});
  data.title = "<script>alert(1)</script>";
  const std::string svg = RenderSvgReport(data);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  const json seen = Inspect(svg);
  ASSERT_EQ(seen["hosts"].size(), 2u);
  EXPECT_EQ(seen["hosts"][0], hostile);
  EXPECT_EQ(seen["hosts"][1], "bad\uFFFD\uFFFDutf8");
  EXPECT_TRUE(Contains(seen["texts"], hostile));
  EXPECT_TRUE(Contains(seen["texts"], "<script>alert(1)</script>"));  // shown as text, not markup
}

TEST_F(SvgReportTest, ValidateSectionAppearsIffGiven) {
  ReportData data;
  data.offsets = ReadOffsets(OffsetsText(3, 20));
  data.align_summary = Summary({HostSummary("gpu1", 1)});

  json seen = Inspect(RenderSvgReport(data));
  EXPECT_TRUE(seen["skew_metrics"].empty());
  EXPECT_EQ(seen["bars_before"], 0);
  EXPECT_TRUE(Contains(seen["texts"], "Not given: no validate results"));

  data.validate_after = Validate(0, 0.05);
  seen = Inspect(RenderSvgReport(data));
  EXPECT_EQ(seen["skew_metrics"].size(), 7u);
  EXPECT_EQ(seen["bars_before"], 0);
  EXPECT_EQ(seen["bars_after"], 7);
  EXPECT_TRUE(Contains(seen["texts"], "No violation after alignment."));
  EXPECT_FALSE(Contains(seen["texts"], "Not given: no validate results"));

  data.validate_before = Validate(37, 30'000);
  seen = Inspect(RenderSvgReport(data));
  EXPECT_EQ(seen["skew_metrics"].size(), 7u);
  EXPECT_EQ(seen["bars_before"], 7);
  EXPECT_EQ(seen["bars_after"], 7);
  EXPECT_TRUE(Contains(seen["texts"], "Worst violations before alignment (3 of 37):"));
  EXPECT_TRUE(Contains(seen["texts"], "all-reduce-start.3 seq 0: ended on gpu0 29.0 ms before it started on gpu3"));
  EXPECT_TRUE(Contains(seen["texts"], "30.0 ms"));  // before: start p50 = 1000 ns × 30 000
  EXPECT_TRUE(Contains(seen["texts"], "50 ns"));    // after: start p50 = 1000 ns × 0.05
}

TEST_F(SvgReportTest, UnreachableAndMissingInstantsAreHatched) {
  std::string text = OffsetsText(3, 30);
  std::string kept;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line);
    const int64_t i = (j["t_ns"].get<int64_t>() - kStart) / 1'000'000'000;
    if (j["node"] == 1 && i >= 10 && i < 13) {  // unreachable for three instants
      for (const char* key : {"offset_ns", "drift", "uncertainty_ns", "residual_ns"}) j[key] = nullptr;
      j["reachable"] = false;
      j["component"] = -1;
    }
    if (j["node"] == 2 && i == 20) continue;  // no line at all
    kept += j.dump() + "\n";
  }
  // Node 3 was never solved.
  kept += json{{"schema", "chronolink.offset.v1"}, {"node", 3}, {"reference", 0}, {"t_ns", kStart},
               {"offset_ns", nullptr}, {"drift", nullptr}, {"uncertainty_ns", nullptr}, {"residual_ns", nullptr},
               {"reachable", false}, {"component", -1}, {"edges_used", 0}}
              .dump() +
          "\n";
  ReportData data;
  data.offsets = ReadOffsets(kept);
  const json seen = Inspect(RenderSvgReport(data));
  ASSERT_EQ(seen["rows"].size(), 4u);
  EXPECT_EQ(seen["rows"][0]["unreachable"], 0);
  EXPECT_EQ(seen["rows"][0]["missing"], 0);
  EXPECT_EQ(seen["rows"][1]["unreachable"], 2);  // offset and σ plots
  EXPECT_EQ(seen["rows"][1]["gap_ticks"], 2);
  EXPECT_EQ(seen["rows"][1]["offset_lines"].size(), 2u);  // broken at the gap
  EXPECT_TRUE(Contains(seen["rows"][1]["texts"], "3 unreachable"));
  EXPECT_EQ(seen["rows"][2]["missing"], 2);
  EXPECT_EQ(seen["rows"][2]["unreachable"], 0);
  EXPECT_EQ(seen["rows"][2]["offset_lines"].size(), 2u);
  EXPECT_TRUE(Contains(seen["rows"][2]["texts"], "1 missing"));
  EXPECT_TRUE(Contains(seen["rows"][3]["texts"], "never reachable"));
  EXPECT_TRUE(seen["rows"][3]["offset_lines"].empty());
  EXPECT_TRUE(Contains(seen["texts"], "Not given: no alignment summary"));
}

// A stalled agent's instant (30 ms off under a 250 µs sigma, where its
// neighbours have ~20 ns) is drawn apart: hatched, with a hollow mark at
// the frame's edge (it lies off the row's scale), the line broken, said in
// the row and the legend; the rows' scales are the ordinary instants'. With
// the rule off (factor 0) it is an ordinary point that squashes its row.
TEST_F(SvgReportTest, AStalledAgentsInstantIsDrawnApart) {
  std::string text;
  std::istringstream lines(OffsetsText(3, 60));
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line);
    if (j["node"] == 2 && j["t_ns"] == kStart + 30'000'000'000) {
      j["offset_ns"] = j["offset_ns"].get<double>() + 30e6;
      j["uncertainty_ns"] = 250e3;
    }
    text += j.dump() + "\n";
  }
  // The spread of the line's points as a share of the frame's height, the
  // topmost point left out when `but_the_top`.
  const auto offset_spread = [](const json& row, bool but_the_top) {
    std::vector<double> ys;
    for (const auto& line : row["offset_lines"]) {
      for (const auto& p : line) ys.push_back(p[1].get<double>());
    }
    std::sort(ys.begin(), ys.end());
    if (but_the_top) ys.erase(ys.begin());
    return (ys.back() - ys.front()) / row["frame"]["height"].get<double>();
  };
  ReportData data;
  data.offsets = ReadOffsets(text);
  const json seen = Inspect(RenderSvgReport(data));
  ASSERT_EQ(seen["rows"].size(), 3u);
  const json& row = seen["rows"][2];
  EXPECT_EQ(row["set_aside"], 2);        // offset and σ plots
  EXPECT_EQ(row["set_aside_marks"], 2);  // one mark in each
  EXPECT_EQ(row["offset_lines"].size(), 2u);
  EXPECT_TRUE(Contains(row["texts"], "1 set aside"));
  EXPECT_GT(offset_spread(row, false), 0.4);  // the scale widens to nice ticks
  EXPECT_EQ(seen["rows"][1]["set_aside"], 0);
  EXPECT_TRUE(Contains(seen["texts"], "set aside as a stalled agent's"));

  data.stalled.sigma_factor = 0;
  const json kept = Inspect(RenderSvgReport(data));
  const json& kept_row = kept["rows"][2];
  EXPECT_EQ(kept_row["set_aside"], 0);
  EXPECT_EQ(kept_row["set_aside_marks"], 0);
  EXPECT_EQ(kept_row["offset_lines"].size(), 1u);
  EXPECT_FALSE(Contains(kept["texts"], "set aside"));
  EXPECT_GT(offset_spread(kept_row, false), 0.4);  // the spike and the rest...
  EXPECT_LT(offset_spread(kept_row, true), 0.1);   // ...which it squashes
  EXPECT_FALSE(Contains(kept_row["texts"], "set aside"));
}

TEST_F(SvgReportTest, DecimationKeepsASpikeAmongAHundredThousandInstants) {
  // Node 1 ramps 0 -> 1 ms over 100k instants 10 ms apart, with one 5 ms
  // spike in the middle; node 0 is the reference.
  OffsetsInput offsets;
  offsets.reference = {false, 0};
  constexpr int kInstants = 100'000;
  for (uint32_t node : {0u, 1u}) {
    for (int i = 0; i < kInstants; ++i) {
      OffsetRecord r;
      r.node = node;
      r.t_ns = kStart + int64_t{i} * 10'000'000;
      r.reachable = true;
      r.offset_ns = node == 0 ? 0 : (i == kInstants / 2 ? 5e6 : 1e6 * i / kInstants);
      r.uncertainty_ns = node == 0 ? 0 : 30;
      offsets.records.push_back(r);
    }
  }
  ReportData data;
  data.offsets = std::move(offsets);
  const std::string svg = RenderSvgReport(data);
  EXPECT_LT(svg.size(), 1'000'000u);  // decimated: 200k instants would be far more
  const json seen = Inspect(svg);
  ASSERT_EQ(seen["rows"].size(), 2u);
  const json& row = seen["rows"][1];
  ASSERT_EQ(row["offset_lines"].size(), 1u);
  const json& points = row["offset_lines"][0];
  EXPECT_LE(points.size(), 4 * row["frame"]["width"].get<size_t>());
  double top = 1e9, bottom = -1e9;
  for (const auto& p : points) {
    top = std::min(top, p[1].get<double>());
    bottom = std::max(bottom, p[1].get<double>());
  }
  // The highest points are the spike's, in the middle column: a decimation
  // that dropped it would put the top at the ramp's end, on the right.
  const double frame_middle = row["frame"]["x"].get<double>() + row["frame"]["width"].get<double>() / 2;
  int upper = 0;
  for (const auto& p : points) {
    if (p[1].get<double>() < (top + bottom) / 2) {
      ++upper;
      EXPECT_NEAR(p[0].get<double>(), frame_middle, 2.0);
    }
  }
  EXPECT_GE(upper, 1);
  EXPECT_LE(upper, 4);
}

TEST_F(SvgReportTest, SixtyFourNodes) {
  ReportData data;
  data.offsets = ReadOffsets(OffsetsText(64, 200));
  const json seen = Inspect(RenderSvgReport(data));
  ASSERT_EQ(seen["rows"].size(), 64u);
  EXPECT_EQ(seen["rows"][63]["node"], 63);
}

TEST_F(SvgReportTest, EmptyInputsStillMakeAPage) {
  ReportData data;
  const json seen = Inspect(RenderSvgReport(data));
  EXPECT_TRUE(seen["rows"].empty());
  EXPECT_TRUE(Contains(seen["texts"], "The offsets hold no solved instant"));
  EXPECT_TRUE(Contains(seen["texts"], "Not given: no alignment summary"));
  EXPECT_TRUE(Contains(seen["texts"], "Not given: no validate results"));
  // One instant of one node: a dot, no division by a zero span.
  data.offsets = ReadOffsets(OffsetsText(1, 1));
  EXPECT_EQ(Inspect(RenderSvgReport(data))["rows"].size(), 1u);
}

TEST_F(SvgReportTest, MistypedSummaryFieldsLeaveBlankCells) {
  ReportData data;
  data.offsets = ReadOffsets(OffsetsText(2, 5));
  json host = HostSummary("gpu1", 1);
  host["events"] = "many";
  host["node"] = -7;
  host["correction_first_ns"] = nullptr;
  data.align_summary = Summary({host});
  data.validate_after = json{{"violations_total", "x"}, {"start_skew", 3}, {"families", {{"not", "a family"}}}};
  const json seen = Inspect(RenderSvgReport(data));
  EXPECT_EQ(seen["hosts"], json({"gpu1"}));
  EXPECT_EQ(seen["skew_metrics"].size(), 7u);
  EXPECT_TRUE(Contains(seen["texts"], "not reported"));
}

TEST_F(SvgReportTest, SameInputSameBytes) {
  ReportData data;
  data.offsets = ReadOffsets(OffsetsText(3, 50));
  data.generated_at = std::chrono::system_clock::time_point(std::chrono::seconds(1'795'600'000));
  const std::string once = RenderSvgReport(data);
  EXPECT_EQ(once, RenderSvgReport(data));
  EXPECT_NE(once.find("Generated 2026-11-25 09:46:40.000 UTC"), std::string::npos);
}

TEST_F(SvgReportTest, PngWhenRsvgConvertIsInstalled) {
  const fs::path svg = dir_ / "report.svg";
  const fs::path png = dir_ / "report.png";
  std::string error;
  if (!RsvgConvertPath()) {
    std::ofstream(svg) << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\"/>";
    EXPECT_FALSE(ConvertSvgToPng(svg, png, 1, &error));
    EXPECT_NE(error.find("librsvg2-bin"), std::string::npos) << error;
    GTEST_SKIP() << "rsvg-convert is not installed";
  }
  ReportData data;
  data.offsets = ReadOffsets(OffsetsText(3, 30));
  std::ofstream(svg) << RenderSvgReport(data);
  ASSERT_TRUE(ConvertSvgToPng(svg, png, 1, &error)) << error;
  std::ifstream in(png, std::ios::binary);
  char head[8] = {};
  in.read(head, 8);
  EXPECT_EQ(std::string(head, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(fs::file_size(png), 10'000u);
  EXPECT_FALSE(fs::exists(png.string() + ".partial"));
  // A file that is not SVG: an error naming it and the tool's complaint, no PNG.
  std::ofstream(dir_ / "not.svg") << "this is not svg";
  EXPECT_FALSE(ConvertSvgToPng(dir_ / "not.svg", dir_ / "not.png", 1, &error));
  EXPECT_NE(error.find("not.svg"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_ / "not.png"));
  EXPECT_FALSE(fs::exists(dir_ / "not.png.partial"));
}

}  // namespace
}  // namespace chronolink::trace
