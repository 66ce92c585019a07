#include "trace/report/validate_panel.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "trace/report/axis_scale.h"
#include "trace/report/legend.h"
#include "trace/report/report_json.h"
#include "trace/report/report_style.h"
#include "trace/report/svg_text.h"

namespace chronolink::trace::report {
namespace {

using nlohmann::json;

constexpr double kBarX0 = 230, kBarX1 = 900;
constexpr double kBarHeight = 10;
constexpr double kMetricHeight = 30;
constexpr size_t kMaxFamilies = 12;
constexpr size_t kListedViolations = 5;

struct Side {
  const char* name;       // "before" / "after"
  const char* bar_class;
  const json* result;     // null when not given
};

// validate/1 writes "start_skew": {"p50_ns": ...}; accept "start_skew_ns"
// and bare "p50" as well, so an older or newer writer still draws.
std::optional<double> Skew(const json& result, const std::string& edge, const std::string& stat) {
  for (const std::string& object : {edge + "_skew", edge + "_skew_ns"}) {
    const json& skew = ObjectField(result, object);
    for (const std::string& key : {stat + "_ns", stat}) {
      if (const auto v = NumberField(skew, key)) return v;
    }
  }
  return std::nullopt;
}

std::optional<int64_t> ViolationCount(const json& result) {
  if (const auto total = IntField(result, "violations_total")) return total;
  if (const auto count = IntField(result, "violations")) return count;
  if (const auto count = IntField(ObjectField(result, "violations"), "count")) return count;
  return std::nullopt;
}

struct Metric {
  std::string edge;  // "start" / "end"
  std::string stat;  // "p50", ...
};
const std::vector<Metric> kMetrics = {{"start", "p50"}, {"start", "p90"}, {"start", "p99"}, {"start", "max"},
                                      {"end", "p50"},   {"end", "p99"},   {"end", "max"}};

double DrawHeadline(const std::vector<Side>& sides, double top, SvgDocument* doc) {
  std::vector<TextRun> runs = {{"Violations  ", "strong"}};
  for (size_t i = 0; i < sides.size(); ++i) {
    if (i > 0) runs.push_back({"   →   ", "muted"});
    runs.push_back({std::string(sides[i].name) + " alignment: ", ""});
    const auto count = ViolationCount(*sides[i].result);
    runs.push_back({count ? FormatCount(*count) : "?", count && *count == 0 ? "good" : "bad"});
  }
  doc->Text(kMargin, top, runs, "section");
  std::string detail;
  for (const Side& side : sides) {
    const json& r = *side.result;
    if (!detail.empty()) detail += "; ";
    detail += std::string(side.name) + ": " + FormatCount(IntField(r, "matched_instances").value_or(0)) +
              " matched collective instances of " + FormatCount(IntField(r, "events").value_or(0)) + " events";
    if (const auto tolerance = IntField(r, "tolerance_ps")) detail += ", tolerance " + FormatDurationNs(*tolerance / 1e3);
  }
  doc->Text(kMargin, top + 18, detail, "explain");
  return top + 40;
}

LogScale SkewScale(const std::vector<Side>& sides) {
  double low = 0, high = 0;
  for (const Side& side : sides) {
    for (const Metric& m : kMetrics) {
      const double v = Skew(*side.result, m.edge, m.stat).value_or(0);
      if (v > 0 && (low == 0 || v < low)) low = v;
      high = std::max(high, v);
    }
  }
  return LogScale(low, high, 1.0, kBarX0, kBarX1);
}

// "1 µs", "100 ms": a decade's duration without trailing zeros.
std::string DecadeLabel(double ns) {
  std::string text = FormatDurationNs(ns);
  for (const char* zeros : {".00 ", ".0 "}) {
    if (const size_t at = text.find(zeros); at != std::string::npos) text.erase(at, std::string(zeros).size() - 1);
  }
  return text;
}

double DrawSkewChart(const std::vector<Side>& sides, double top, SvgDocument* doc) {
  const LogScale x = SkewScale(sides);
  const double chart_top = top;
  const double chart_bottom = top + kMetrics.size() * kMetricHeight;
  for (double decade : x.decades()) doc->Line(x(decade), chart_top, x(decade), chart_bottom, "grid");
  double y = top;
  for (const Metric& m : kMetrics) {
    doc->OpenGroup("skew-metric", {{{"metric", m.edge + "_" + m.stat}}});
    doc->Text(kBarX0 - 10, y + 17, m.edge + " skew " + m.stat, "", Anchor::kEnd);
    double bar_y = y + (kMetricHeight - sides.size() * (kBarHeight + 2)) / 2;
    for (const Side& side : sides) {
      const auto v = Skew(*side.result, m.edge, m.stat);
      const double end = v ? x(*v) : kBarX0;
      doc->Rect(kBarX0, bar_y, std::max(end - kBarX0, 1.0), kBarHeight, side.bar_class);
      doc->Text(end + 5, bar_y + 9, v ? FormatDurationNs(*v) : "not reported", "small");
      bar_y += kBarHeight + 2;
    }
    doc->CloseGroup();
    y += kMetricHeight;
  }
  doc->Line(kBarX0, chart_bottom, kBarX1, chart_bottom, "rule");
  for (double decade : x.decades()) {
    doc->Text(x(decade), chart_bottom + 14, DecadeLabel(decade), "tick", Anchor::kMiddle);
  }
  doc->Text((kBarX0 + kBarX1) / 2, chart_bottom + 30,
            "spread across hosts of each matched collective's start (or end), log scale", "axis-label",
            Anchor::kMiddle);
  return chart_bottom + 44;
}

// family name -> its summary, per side.
std::map<std::string, const json*> FamiliesOf(const json& result) {
  std::map<std::string, const json*> out;
  for (const json& f : ArrayField(result, "families")) {
    if (const auto name = StringField(f, "family")) out.emplace(*name, &f);
  }
  return out;
}

double DrawFamilyTable(const std::vector<Side>& sides, double top, SvgDocument* doc) {
  std::vector<std::map<std::string, const json*>> per_side;
  std::set<std::string> names;
  for (const Side& side : sides) {
    per_side.push_back(FamiliesOf(*side.result));
    for (const auto& [name, f] : per_side.back()) names.insert(name);
  }
  if (names.empty()) return top;
  doc->Rect(kMargin, top, kContentRight - kMargin, 20, "header-band");
  doc->Text(kMargin + 8, top + 14, "collective family", "small strong");
  double x = 560;
  for (const Side& side : sides) {
    doc->Text(x, top + 14, std::string("violations ") + side.name, "small strong", Anchor::kEnd);
    doc->Text(x + 190, top + 14, std::string("start skew p99 ") + side.name, "small strong", Anchor::kEnd);
    x += 340;
  }
  double y = top + 20;
  size_t shown = 0;
  for (const std::string& name : names) {
    if (shown++ == kMaxFamilies) break;
    doc->Text(kMargin + 8, y + 14, Ellipsize(name, 48), "");
    x = 560;
    for (const auto& families : per_side) {
      const auto it = families.find(name);
      static const json kNone = json::object();
      const json& f = it == families.end() ? kNone : *it->second;
      const auto violations = IntField(f, "violations");
      doc->Text(x, y + 14, violations ? FormatCount(*violations) : "–", violations && *violations > 0 ? "bad" : "",
                Anchor::kEnd);
      const auto p99 = Skew(f, "start", "p99");
      doc->Text(x + 190, y + 14, p99 ? FormatDurationNs(*p99) : "–", "", Anchor::kEnd);
      x += 340;
    }
    y += 20;
  }
  if (names.size() > kMaxFamilies) {
    doc->Text(kMargin + 8, y + 14, "… " + std::to_string(names.size() - kMaxFamilies) + " more families", "muted");
    y += 20;
  }
  doc->Line(kMargin, y, kContentRight, y, "rule");
  return y + 24;
}

std::string ViolationText(const json& v) {
  const std::string key = StringField(v, "key").value_or(StringField(v, "collective").value_or("?"));
  std::string instance;
  if (const auto seq = IntField(v, "seq")) instance = " seq " + std::to_string(*seq);
  const auto by = NumberField(v, "by_ns");
  const std::string by_text = by ? FormatDurationNs(*by) : "?";
  const std::string first = StringField(v, "ended_first").value_or("?");
  const std::string last = StringField(v, "started_last").value_or("?");
  if (BoolField(v, "transfer").value_or(false)) {
    return key + instance + ": the receive on " + first + " ended " + by_text + " before the send on " + last +
           " started";
  }
  return key + instance + ": ended on " + first + " " + by_text + " before it started on " + last;
}

double DrawWorstViolations(const std::vector<Side>& sides, double top, SvgDocument* doc) {
  double y = top;
  for (const Side& side : sides) {
    const json& list = ArrayField(*side.result, "violations");
    const int64_t total = ViolationCount(*side.result).value_or(static_cast<int64_t>(list.size()));
    if (total == 0) {
      doc->Text(kMargin, y, std::string("No violation ") + side.name + " alignment.", "good");
      y += 20;
      continue;
    }
    doc->Text(kMargin, y, std::string("Worst violations ") + side.name + " alignment (" +
                              std::to_string(std::min(list.size(), kListedViolations)) + " of " + FormatCount(total) + "):",
              "strong");
    y += 16;
    for (size_t i = 0; i < list.size() && i < kListedViolations; ++i) {
      doc->Text(kMargin + 12, y, Ellipsize(ViolationText(list[i]), 170), "small");
      y += 15;
    }
    y += 8;
  }
  return y + 8;
}

double DrawExplanation(double top, SvgDocument* doc) {
  doc->Text(kMargin, top, "3  Collective checks before vs after alignment", "section");
  doc->Text(kMargin, top + 20,
            "chronolink-trace validate matches each collective across the hosts that ran it. A violation: it ended "
            "on one host before it started on another, impossible in true time.",
            "explain");
  doc->Text(kMargin, top + 35,
            "Skew: how far apart the hosts' starts (or ends) of one collective are. Alignment should remove the "
            "violations and shrink the skew to what the workload itself does.",
            "explain");
  return top + 50;
}

}  // namespace

double DrawValidatePanel(const std::optional<json>& before, const std::optional<json>& after, double top,
                         SvgDocument* doc) {
  double y = DrawExplanation(top, doc);
  std::vector<Side> sides;
  if (before) sides.push_back({"before", "bar-before", &*before});
  if (after) sides.push_back({"after", "bar-after", &*after});
  doc->OpenGroup("validate", {{{"sides", std::to_string(sides.size())}}});
  if (sides.empty()) {
    doc->Text(kMargin, y + 6,
              "Not given: no validate results (chronolink-trace validate --json, before and after align) were passed "
              "to the report.",
              "explain warn");
    doc->CloseGroup();
    return y + 30;
  }
  y = DrawHeadline(sides, y + 14, doc);
  std::vector<LegendItem> legend;
  for (const Side& side : sides) {
    legend.push_back({LegendSwatch::kBar, side.bar_class, std::string(side.name) + " alignment"});
  }
  y = DrawLegend(legend, kBarX0, y, doc) + 10;
  y = DrawSkewChart(sides, y, doc);
  y = DrawFamilyTable(sides, y, doc);
  y = DrawWorstViolations(sides, y + 4, doc);
  doc->CloseGroup();
  return y;
}

}  // namespace chronolink::trace::report
